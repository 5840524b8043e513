use std::sync::Arc;
use std::task::{Wake, Waker};

use serde_json::json;

use super::*;

struct NoWake;
impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

fn taken(handle: &StreamHandle) -> Vec<(String, f64)> {
    let waker = Waker::from(Arc::new(NoWake));
    let reports = handle.inbox.take(&waker);
    reports
        .into_iter()
        .map(|(id, p)| (id, p.progress))
        .collect()
}

fn report(n: f64) -> Progress {
    Progress {
        progress: n,
        total: Some(5.0),
        message: Some(format!("step {n}/5")),
    }
}

fn mcp(name: &str, arguments: Value, trace: Option<TraceId>) -> McpToolCall {
    McpToolCall {
        server: "github".into(),
        function_name: name.into(),
        arguments,
        trace_id: trace,
    }
}

#[test]
fn parallel_calls_of_one_tool_are_told_apart_by_their_arguments() {
    let hub = LocalHub::new(Duration::from_secs(5));
    let stream = hub.stream(None);
    stream.call_running("c1", "search", r#"{"q": "a", "n": 1}"#);
    stream.call_running("c2", "search", r#"{"q":"b"}"#);
    let b1 = hub.bind(mcp("search", json!({"n": 1, "q": "a"}), None));
    let b2 = hub.bind(mcp("search", json!({"q": "b"}), None));
    assert_eq!(hub.progress(b1, report(1.0)), Delivery::Delivered);
    assert_eq!(hub.progress(b2, report(2.0)), Delivery::Delivered);
    assert_eq!(taken(&stream), vec![("c1".into(), 1.0), ("c2".into(), 2.0)]);
}

#[test]
fn identical_calls_in_two_streams_need_a_trace_id() {
    let hub = LocalHub::new(Duration::from_secs(5));
    let t1 = TraceId([1; 16]);
    let t2 = TraceId([2; 16]);
    let (s1, s2) = (hub.stream(Some(t1)), hub.stream(Some(t2)));
    s1.call_running("c1", "search", r#"{"q":"a"}"#);
    s2.call_running("c2", "search", r#"{"q":"a"}"#);
    let blind = hub.bind(mcp("search", json!({"q": "a"}), None));
    assert_eq!(hub.progress(blind, report(1.0)), Delivery::Ambiguous);
    let traced = hub.bind(mcp("search", json!({"q": "a"}), Some(t2)));
    assert_eq!(hub.progress(traced, report(2.0)), Delivery::Delivered);
    assert!(taken(&s1).is_empty(), "never the wrong user");
    assert_eq!(taken(&s2), vec![("c2".into(), 2.0)]);
    let post = Target::Tool {
        name: "search".into(),
        arguments: None,
    };
    assert_eq!(hub.post_now(post, report(3.0)), Delivery::Ambiguous);
    assert_eq!(
        hub.post_now(Target::CallId("c1".into()), report(4.0)),
        Delivery::Delivered
    );
    assert_eq!(taken(&s1), vec![("c1".into(), 4.0)]);
}

/// A trace id is the client's, so two streams may carry the same one; then the
/// arguments must single a call out, else nobody gets the report.
#[test]
fn a_trace_id_two_streams_share_decides_only_with_the_arguments() {
    let hub = LocalHub::new(Duration::from_secs(5));
    let shared = TraceId([7; 16]);
    let (alice, bob) = (hub.stream(Some(shared)), hub.stream(Some(shared)));
    alice.call_running("c_alice", "search", r#"{"q":"alice"}"#);
    bob.call_running("c_bob", "search", r#"{"q":"bob"}"#);
    let for_bob = hub.bind(mcp("search", json!({"q": "bob"}), Some(shared)));
    assert_eq!(hub.progress(for_bob, report(1.0)), Delivery::Delivered);
    let for_alice = hub.bind(mcp("search", json!({"q": "alice"}), Some(shared)));
    assert_eq!(hub.progress(for_alice, report(2.0)), Delivery::Delivered);
    assert_eq!(taken(&alice), vec![("c_alice".into(), 2.0)]);
    assert_eq!(taken(&bob), vec![("c_bob".into(), 1.0)]);
    // Arguments neither stream has, or both: nobody.
    let other = hub.bind(mcp("search", json!({"q": "carol"}), Some(shared)));
    assert_eq!(hub.progress(other, report(3.0)), Delivery::Ambiguous);
    let carol = hub.stream(Some(shared));
    carol.call_running("c_carol", "search", r#"{"q":"bob"}"#);
    let both = hub.bind(mcp("search", json!({"q": "bob"}), Some(shared)));
    assert_eq!(hub.progress(both, report(4.0)), Delivery::Ambiguous);
    assert!(taken(&alice).is_empty() && taken(&bob).is_empty() && taken(&carol).is_empty());
}

/// A call_id is the gateway's, and two streams may show
/// the same one (a replayed response, two gateways); a report naming it reaches neither.
#[test]
fn a_call_id_two_streams_show_is_ambiguous() {
    let hub = LocalHub::new(Duration::from_secs(5));
    let (s1, s2) = (hub.stream(None), hub.stream(None));
    s1.call_running("c_same", "search", r#"{"q":"a"}"#);
    s2.call_running("c_same", "lookup", r#"{"q":"b"}"#);
    let target = || Target::CallId("c_same".into());
    assert_eq!(hub.post_now(target(), report(1.0)), Delivery::Ambiguous);
    assert_eq!(hub.post_exact(target(), report(2.0)), Delivery::Ambiguous);
    assert!(
        taken(&s1).is_empty() && taken(&s2).is_empty(),
        "never the wrong user"
    );
    // Once one of them closes, the other is the only one.
    s1.call_finished("c_same");
    assert_eq!(hub.post_now(target(), report(3.0)), Delivery::Delivered);
    assert_eq!(taken(&s2), vec![("c_same".into(), 3.0)]);
}

/// Within one traced stream, the arguments pick among parallel calls of the tool
/// (the trace names the stream, not the call).
#[test]
fn in_one_traced_stream_the_arguments_pick_among_parallel_calls() {
    let hub = LocalHub::new(Duration::from_secs(5));
    let trace = TraceId([3; 16]);
    let stream = hub.stream(Some(trace));
    stream.call_running("c1", "search", r#"{"q":"a"}"#);
    stream.call_running("c2", "search", r#"{"q":"b"}"#);
    stream.call_running("c3", "search", r#"{"q":"c"}"#);
    // Bound in an order unlike the calls', so neither the first nor the last call is a guess.
    for (args, n) in [
        (json!({"q": "b"}), 2.0),
        (json!({"q": "c"}), 3.0),
        (json!({"q": "a"}), 1.0),
    ] {
        let binding = hub.bind(mcp("search", args, Some(trace)));
        assert_eq!(hub.progress(binding, report(n)), Delivery::Delivered);
    }
    let mut got = taken(&stream);
    got.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        got,
        vec![("c1".into(), 1.0), ("c2".into(), 2.0), ("c3".into(), 3.0)]
    );
    // The trace alone still decides when no call has those arguments (one stream, one tool).
    let other = hub.bind(mcp("search", json!({"q": "zzz"}), Some(trace)));
    assert_eq!(hub.progress(other, report(4.0)), Delivery::Delivered);
    assert_eq!(taken(&stream).len(), 1);
}

#[test]
fn an_mcp_call_before_its_stream_waits_and_keeps_the_newest_report() {
    let hub = LocalHub::new(Duration::from_secs(5));
    let stream = hub.stream(None);
    let b = hub.bind(mcp("slow", json!({}), None));
    assert_eq!(hub.progress(b, report(1.0)), Delivery::Waiting);
    assert_eq!(hub.progress(b, report(2.0)), Delivery::Waiting);
    stream.call_running("c1", "slow", "{}");
    assert_eq!(
        taken(&stream),
        vec![("c1".into(), 2.0)],
        "delivered once bound"
    );
    assert_eq!(hub.progress(b, report(3.0)), Delivery::Delivered);
    stream.call_finished("c1");
    assert_eq!(hub.progress(b, report(4.0)), Delivery::Late);
    hub.release(b);
    assert_eq!(hub.state().bindings.len(), 0);
}

#[test]
fn the_bind_window_runs_out_and_closed_calls_are_late() {
    let hub = LocalHub::new(Duration::from_millis(10));
    let t0 = Instant::now();
    let b = hub.bind_at(mcp("slow", json!({}), None), t0);
    let later = t0 + Duration::from_millis(11);
    assert_eq!(hub.progress_at(b, report(1.0), later), Delivery::Unmatched);
    let stream = hub.stream(None);
    stream.call_running("c1", "done_tool", "{}");
    stream.call_finished("c1");
    let late = hub.bind(mcp("done_tool", json!({}), None));
    assert_eq!(hub.progress(late, report(1.0)), Delivery::Late);
    drop(stream);
    assert!(hub.state().streams.is_empty(), "a dropped stream is gone");
}

#[test]
fn without_the_bus_only_exact_matches_are_delivered() {
    let hub = LocalHub::new(Duration::from_secs(5));
    let trace = TraceId([7; 16]);
    let stream = hub.stream(Some(trace));
    stream.call_running("c1", "search", r#"{"q":"a"}"#);
    // The name and arguments match, but another replica may hold an identical call.
    let blind = hub.bind_exact(mcp("search", json!({"q": "a"}), None));
    assert_eq!(hub.progress(blind, report(1.0)), Delivery::Unmatched);
    let tool = Target::Tool {
        name: "search".into(),
        arguments: Some(json!({"q": "a"})),
    };
    assert_eq!(hub.post_exact(tool, report(1.0)), Delivery::Unmatched);
    assert!(taken(&stream).is_empty());
    // A trace id or a call_id is exact.
    let traced = hub.bind_exact(mcp("search", json!({"q": "other"}), Some(trace)));
    assert_eq!(hub.progress(traced, report(2.0)), Delivery::Delivered);
    assert_eq!(
        hub.post_exact(Target::CallId("c1".into()), report(3.0)),
        Delivery::Delivered
    );
    assert_eq!(taken(&stream), vec![("c1".into(), 3.0)]);
    // A traced call not open yet waits, and binds by its trace only.
    let early = hub.bind_exact(mcp("later", json!({}), Some(trace)));
    assert_eq!(hub.progress(early, report(4.0)), Delivery::Waiting);
    hub.stream(None).call_running("c9", "later", "{}");
    stream.call_running("c2", "later", "{}");
    assert_eq!(taken(&stream), vec![("c2".into(), 4.0)]);
}

#[test]
fn an_observer_hears_of_every_open_and_close() {
    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);
    impl Observer for Heard {
        fn opened(&self, call: OpenedCall<'_>) {
            let args = call.arguments.map(Value::to_string).unwrap_or_default();
            let line = format!("open {} {} {} {args}", call.stream, call.call_id, call.name);
            self.0.lock().expect("lock").push(line);
        }
        fn closed(&self, stream: u64, call_id: &str) {
            let line = format!("close {stream} {call_id}");
            self.0.lock().expect("lock").push(line);
        }
    }
    let heard = Arc::new(Heard::default());
    let hub = LocalHub::observed(Duration::from_secs(5), heard.clone());
    let stream = hub.stream(None);
    stream.call_running("c1", "search", r#"{"q":"a"}"#);
    stream.call_running("c2", "raw", "not json");
    stream.call_finished("c1");
    stream.call_finished("unknown");
    let id = stream.id();
    drop(stream);
    let heard = heard.0.lock().expect("lock").clone();
    assert_eq!(
        heard,
        [
            format!(r#"open {id} c1 search {{"q":"a"}}"#),
            format!("open {id} c2 raw "),
            format!("close {id} c1"),
            format!("close {id} c2"),
        ]
    );
}
