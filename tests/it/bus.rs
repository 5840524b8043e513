//! The progress bus against a real `redis-server`: two hubs in one process, each with its own
//! registry of streams, sharing one Redis as two replicas would. The scripts' rules (lookup
//! across replicas, the ambiguity rule, waiting bindings, clean-up) are checked here; the
//! two-process scenarios are in `tests/it/replicas.rs`.

use crate::common;

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use common::cut::Cut;
use common::redis_server::RedisServer;
use serde_json::{Value, json};
use toolpulse::config::{BusConfig, RedisUrl};
use toolpulse::features::progress::bus::BusHub;
use toolpulse::features::progress::local::StreamHandle;
use toolpulse::features::progress::{
    Delivery, McpToolCall, Progress, ProgressHub, Target, TraceId,
};
use toolpulse::metrics::Metrics;

const PREFIX: &str = "tptest";
const WAIT: Duration = Duration::from_secs(10);

struct NoWake;
impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
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
        server: "srv".into(),
        function_name: name.into(),
        arguments,
        trace_id: trace,
    }
}

struct Replica {
    hub: Arc<BusHub>,
    metrics: Arc<Metrics>,
}

async fn replica(redis: &RedisServer, window: Duration) -> Replica {
    replica_at(&redis.url(), window).await
}

/// A replica whose bus is at `url` (a relay in front of the server, say).
async fn replica_at(url: &str, window: Duration) -> Replica {
    let metrics = Arc::new(Metrics::new());
    let bus = BusConfig {
        url: RedisUrl::parse(url).expect("url"),
        prefix: PREFIX.into(),
    };
    let hub = BusHub::start(&bus, window, metrics.clone()).expect("bus");
    until("the bus is up", || hub.is_up()).await;
    Replica { hub, metrics }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `call_id` is registered (the registrar works off the stream's task).
async fn registered(redis: &RedisServer, call_id: &str) {
    let key = format!("{PREFIX}:c:{call_id}");
    until(&format!("{call_id} is registered"), || {
        redis.keys(PREFIX).iter().any(|(k, _)| *k == key)
    })
    .await;
}

/// The reports a stream's inbox got, waiting (bounded) for at least `n`.
async fn taken(stream: &StreamHandle, n: usize) -> Vec<(String, f64)> {
    let waker = Waker::from(Arc::new(NoWake));
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < n && Instant::now() < deadline {
        got.extend(
            stream
                .inbox
                .take(&waker)
                .into_iter()
                .map(|(id, p)| (id, p.progress)),
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    got
}

/// The reports a stream's inbox got until `last` arrived.
async fn taken_until(stream: &StreamHandle, last: (&str, f64)) -> Vec<(String, f64)> {
    let mut got: Vec<(String, f64)> = Vec::new();
    let deadline = Instant::now() + WAIT;
    while !got.iter().any(|(c, n)| c == last.0 && *n == last.1) {
        assert!(Instant::now() < deadline, "{last:?} never arrived: {got:?}");
        got.extend(taken(stream, 1).await);
    }
    got
}

/// `progress` until the binding is decided (its lookup runs in the background).
async fn decided(
    hub: &BusHub,
    binding: toolpulse::features::progress::BindingId,
    n: f64,
) -> Delivery {
    let deadline = Instant::now() + WAIT;
    loop {
        let delivery = hub.progress(binding, report(n));
        if delivery != Delivery::Waiting || Instant::now() > deadline {
            return delivery;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_open_on_one_replica_gets_progress_through_another() {
    let Some(redis) =
        RedisServer::start("a_call_open_on_one_replica_gets_progress_through_another")
    else {
        return;
    };
    let (a, b) = (replica(&redis, WAIT).await, replica(&redis, WAIT).await);
    let stream = a.hub.streams().stream(None);
    // Everything published under the prefix, to look for argument values in it.
    let heard = redis.listen(PREFIX);
    stream.call_running("call_1", "search", r#"{"q": "alpha-secret", "n": 1}"#);
    stream.call_running("call_2", "search", r#"{"q": "beta-secret"}"#);
    registered(&redis, "call_2").await;

    // By name and arguments (key order does not matter), from replica B.
    let b1 = b
        .hub
        .bind(mcp("search", json!({"n": 1, "q": "alpha-secret"}), None));
    assert_eq!(decided(&b.hub, b1, 1.0).await, Delivery::Delivered);
    assert_eq!(taken(&stream, 1).await, [("call_1".to_string(), 1.0)]);
    for n in 2..=4 {
        assert_eq!(
            b.hub.progress(b1, report(f64::from(n))),
            Delivery::Delivered
        );
    }
    let later = taken_until(&stream, ("call_1", 4.0)).await;
    assert!(
        later.windows(2).all(|w| w[0].1 <= w[1].1),
        "in order: {later:?}"
    );
    // By call_id, through POST /v1/progress on B.
    let posted = b
        .hub
        .post(Target::CallId("call_2".into()), report(2.0))
        .await;
    assert_eq!(posted, Delivery::Delivered);
    assert_eq!(taken(&stream, 1).await, [("call_2".to_string(), 2.0)]);
    b.hub.release(b1);

    // Nothing in Redis holds an argument value: no key name, member or value, no message.
    let keys = redis.keys(PREFIX);
    assert!(keys.iter().all(|(_, ttl)| *ttl > 0), "{keys:?}");
    let contents = redis.contents(PREFIX);
    assert!(
        contents.iter().any(|c| c.contains("call_1")),
        "the calls are registered: {contents:?}"
    );
    assert!(
        contents.iter().all(|c| !c.contains("secret")),
        "{contents:?}"
    );
    let marker = heard.mark(&redis, PREFIX);
    until("the listener heard all that was published", || {
        heard.messages().iter().any(|m| m.ends_with(&marker))
    })
    .await;
    let messages = heard.messages();
    assert!(
        messages.iter().any(|m| m.contains("step 4/5")),
        "the reports went through Redis: {messages:?}"
    );
    assert!(
        messages.iter().all(|m| !m.contains("secret")),
        "{messages:?}"
    );
    let text = b.metrics.encode();
    assert!(!text.contains("progress_bus_errors_total{"), "{text}");
    assert!(
        a.metrics
            .encode()
            .contains(r#"toolpulse_progress_total{source="bus",outcome="delivered"}"#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_on_two_replicas_need_a_trace_id() {
    let Some(redis) = RedisServer::start("identical_calls_on_two_replicas_need_a_trace_id") else {
        return;
    };
    let (a, b) = (replica(&redis, WAIT).await, replica(&redis, WAIT).await);
    let (ta, tb) = (TraceId([0xa; 16]), TraceId([0xb; 16]));
    let on_a = a.hub.streams().stream(Some(ta));
    let on_b = b.hub.streams().stream(Some(tb));
    on_a.call_running("call_a", "search", r#"{"q":"same"}"#);
    on_b.call_running("call_b", "search", r#"{"q":"same"}"#);
    registered(&redis, "call_a").await;
    registered(&redis, "call_b").await;

    for hub in [&a.hub, &b.hub] {
        let blind = hub.bind(mcp("search", json!({"q": "same"}), None));
        assert_eq!(decided(hub, blind, 1.0).await, Delivery::Ambiguous);
        let tool = Target::Tool {
            name: "search".into(),
            arguments: Some(json!({"q": "same"})),
        };
        assert_eq!(hub.post(tool, report(1.0)).await, Delivery::Ambiguous);
    }
    // With trace ids, each call gets its own, whichever replica the MCP call reaches.
    let for_a = b.hub.bind(mcp("search", json!({"q": "same"}), Some(ta)));
    let for_b = a.hub.bind(mcp("search", json!({"q": "same"}), Some(tb)));
    assert_eq!(decided(&b.hub, for_a, 2.0).await, Delivery::Delivered);
    assert_eq!(decided(&a.hub, for_b, 3.0).await, Delivery::Delivered);
    assert_eq!(taken(&on_a, 1).await, [("call_a".to_string(), 2.0)]);
    assert_eq!(taken(&on_b, 1).await, [("call_b".to_string(), 3.0)]);
}

/// In the Redis scripts: two streams on two replicas carrying one trace id (the
/// client's, so it can be copied) and calls of one tool: the arguments decide, else nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_id_two_streams_share_decides_only_with_the_arguments() {
    let test = "a_trace_id_two_streams_share_decides_only_with_the_arguments";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let (a, b) = (replica(&redis, WAIT).await, replica(&redis, WAIT).await);
    let shared = TraceId([0xc; 16]);
    let alice = a.hub.streams().stream(Some(shared));
    let bob = b.hub.streams().stream(Some(shared));
    alice.call_running("call_alice", "search", r#"{"q":"alice"}"#);
    bob.call_running("call_bob", "search", r#"{"q":"bob"}"#);
    registered(&redis, "call_alice").await;
    registered(&redis, "call_bob").await;
    // Alice's call reaches replica B (Bob's), Bob's reaches A: each goes to its own.
    let for_alice = b
        .hub
        .bind(mcp("search", json!({"q": "alice"}), Some(shared)));
    let for_bob = a.hub.bind(mcp("search", json!({"q": "bob"}), Some(shared)));
    assert_eq!(decided(&b.hub, for_alice, 1.0).await, Delivery::Delivered);
    assert_eq!(decided(&a.hub, for_bob, 2.0).await, Delivery::Delivered);
    assert_eq!(taken(&alice, 1).await, [("call_alice".to_string(), 1.0)]);
    assert_eq!(taken(&bob, 1).await, [("call_bob".to_string(), 2.0)]);
    // Arguments neither has: nobody.
    let other = a
        .hub
        .bind(mcp("search", json!({"q": "carol"}), Some(shared)));
    assert_eq!(decided(&a.hub, other, 3.0).await, Delivery::Ambiguous);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_that_comes_first_waits_for_its_call_on_another_replica() {
    let Some(redis) =
        RedisServer::start("an_mcp_call_that_comes_first_waits_for_its_call_on_another_replica")
    else {
        return;
    };
    let (a, b) = (replica(&redis, WAIT).await, replica(&redis, WAIT).await);
    let early = b.hub.bind(mcp("slow", json!({"id": 7}), None));
    let traced_trace = TraceId([0x7; 16]);
    // Traced: matched by trace and name, whatever the arguments.
    let traced = b
        .hub
        .bind(mcp("other", json!({"x": 1}), Some(traced_trace)));
    until("the bindings wait in Redis", || {
        redis
            .keys(PREFIX)
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{PREFIX}:w")))
            .count()
            == 3
    })
    .await;
    assert_eq!(b.hub.progress(early, report(1.0)), Delivery::Waiting);
    assert_eq!(b.hub.progress(early, report(2.0)), Delivery::Waiting);
    assert_eq!(b.hub.progress(traced, report(9.0)), Delivery::Waiting);

    let stream = a.hub.streams().stream(None);
    stream.call_running("call_s", "slow", r#"{"id":7}"#);
    let traced_stream = a.hub.streams().stream(Some(traced_trace));
    traced_stream.call_running("call_o", "other", r#"{"x":2}"#);
    assert_eq!(
        taken(&stream, 1).await,
        [("call_s".to_string(), 2.0)],
        "the newest, once bound"
    );
    assert_eq!(
        taken(&traced_stream, 1).await,
        [("call_o".to_string(), 9.0)]
    );
    assert_eq!(b.hub.progress(early, report(3.0)), Delivery::Delivered);
    until("the waiting entries are claimed", || {
        redis
            .keys(PREFIX)
            .iter()
            .all(|(k, _)| !k.starts_with(&format!("{PREFIX}:w")))
    })
    .await;

    // A binding whose window runs out is unmatched.
    let short = replica(&redis, Duration::from_millis(50)).await;
    let lonely = short.hub.bind(mcp("never", json!({}), None));
    assert_eq!(decided(&short.hub, lonely, 1.0).await, Delivery::Unmatched);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_calls_leave_no_keys_and_every_key_has_a_ttl() {
    let Some(redis) = RedisServer::start("closed_calls_leave_no_keys_and_every_key_has_a_ttl")
    else {
        return;
    };
    let a = replica(&redis, WAIT).await;
    let streams = a.hub.streams();
    let trace = TraceId([0x5; 16]);
    for i in 0..1000 {
        let stream = streams.stream(Some(trace));
        let call = format!("call_{i}");
        stream.call_running(
            &call,
            &format!("tool_{}", i % 7),
            &format!(r#"{{"i":{i}}}"#),
        );
        if i % 2 == 0 {
            stream.call_finished(&call);
        }
        // The rest close with their stream.
    }
    let open = streams.stream(Some(trace));
    open.call_running("call_open", "tool_open", "{}");
    registered(&redis, "call_open").await;
    let keys = redis.keys(PREFIX);
    let ttl = toolpulse::features::progress::bus::registrar::REGISTRATION_TTL.as_millis() as i64;
    assert!(keys.iter().all(|(_, t)| *t > 0 && *t <= ttl), "{keys:?}");
    drop(open);
    until("no keys are left", || redis.keys(PREFIX).is_empty()).await;
    assert!(!a.metrics.encode().contains("progress_bus_errors_total{"));
}

/// How many times Redis ran a registry script (EVALSHA) so far.
fn scripts_run(redis: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut redis.connection())
        .expect("INFO");
    let calls = info
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .map(|rest| rest.split(',').next().unwrap_or("0"));
    calls.map_or(0, |n| n.parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_opens_and_closes_within_the_batch_window_never_reaches_redis() {
    let Some(redis) = RedisServer::start(
        "a_call_that_opens_and_closes_within_the_batch_window_never_reaches_redis",
    ) else {
        return;
    };
    let a = replica(&redis, WAIT).await;
    let streams = a.hub.streams();
    let stream = streams.stream(None);
    // The first pipeline finds the scripts not loaded (a NOSCRIPT call each) and runs again.
    stream.call_running("warm", "search", "{}");
    registered(&redis, "warm").await;
    let before = scripts_run(&redis);
    for i in 0..20 {
        let call = format!("brief_{i}");
        stream.call_running(&call, "search", "{}");
        stream.call_finished(&call);
    }
    // Opened together: registered together, one script each.
    for i in 0..20 {
        stream.call_running(&format!("kept_{i}"), "search", &format!(r#"{{"i":{i}}}"#));
    }
    registered(&redis, "kept_19").await;
    assert_eq!(
        scripts_run(&redis) - before,
        20,
        "only the calls still open are sent"
    );
    assert!(!redis.keys(PREFIX).iter().any(|(k, _)| k.contains("brief_")));
    drop(stream);
    until("no keys are left", || redis.keys(PREFIX).is_empty()).await;
}

/// How many times `op` failed on this replica's bus, as its metrics say.
fn errors(metrics: &Metrics, op: &str) -> u64 {
    let line = format!("toolpulse_progress_bus_errors_total{{op=\"{op}\"}} ");
    let text = metrics.encode();
    let count = text.lines().find_map(|l| l.strip_prefix(line.as_str()));
    count.map_or(0, |n| n.trim().parse().expect("a count"))
}

/// A call that closes while the bus is cut off is removed once it is back. Redis is
/// frozen (SIGSTOP), not restarted empty, so it still holds the registration to remove.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_close_during_an_outage_are_removed_once_the_bus_is_back() {
    let test = "calls_that_close_during_an_outage_are_removed_once_the_bus_is_back";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let a = replica(&redis, WAIT).await;
    let stream = a.hub.streams().stream(None);
    let ended = a.hub.streams().stream(None);
    stream.call_running("kept", "search", r#"{"q":"kept"}"#);
    stream.call_running("gone", "search", r#"{"q":"gone"}"#);
    ended.call_running("ended", "search", r#"{"q":"ended"}"#);
    for call in ["kept", "gone", "ended"] {
        registered(&redis, call).await;
    }

    redis.pause();
    // A report by name asks Redis, gets no answer in time, and marks the bus down.
    let tool = Target::Tool {
        name: "search".into(),
        arguments: Some(json!({"q": "nobody"})),
    };
    assert_eq!(a.hub.post(tool, report(1.0)).await, Delivery::Unmatched);
    until("the bus is down", || !a.hub.is_up()).await;
    let probes = errors(&a.metrics, "connect");
    stream.call_finished("gone");
    drop(ended);
    // The registrar takes changes between probes: two more failed probes prove it has taken
    // these while the bus was down (not once it was back, when they would go out at once).
    until("two more probes failed", || {
        errors(&a.metrics, "connect") >= probes + 2
    })
    .await;
    assert!(!a.hub.is_up(), "still down while frozen");

    redis.resume();
    until("the bus is back", || a.hub.is_up()).await;
    until("the closed calls are removed", || {
        let contents = redis.contents(PREFIX);
        contents
            .iter()
            .all(|c| !c.contains("gone") && !c.contains("ended"))
    })
    .await;
    let contents = redis.contents(PREFIX);
    assert!(
        contents
            .iter()
            .any(|c| c.starts_with(&format!("{PREFIX}:c:kept "))),
        "the open call stays registered: {contents:?}"
    );
}

/// A call that closes just as the bus is cut off: its removal goes out in a batch that gets no
/// answer (it never reached Redis, which keeps the registration). Once the bus is back, the
/// removal is sent again rather than left to the TTL, where the stale entry would make a
/// report for an identical call elsewhere ambiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_lost_in_a_cut_is_sent_again_once_the_bus_is_back() {
    let test = "a_removal_lost_in_a_cut_is_sent_again_once_the_bus_is_back";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let relay = Cut::start(([127, 0, 0, 1], redis.port).into()).await;
    let a = replica_at(&format!("redis://{}/0", relay.addr), WAIT).await;
    let stream = a.hub.streams().stream(None);
    stream.call_running("kept", "search", r#"{"q":"kept"}"#);
    stream.call_running("gone", "search", r#"{"q":"gone"}"#);
    registered(&redis, "kept").await;
    registered(&redis, "gone").await;

    relay.cut();
    assert!(a.hub.is_up(), "nothing has noticed the cut yet");
    stream.call_finished("gone");
    // The removal's batch is the first thing to get no answer.
    until("the bus is down", || !a.hub.is_up()).await;
    assert!(
        errors(&a.metrics, "register") >= 1,
        "{}",
        a.metrics.encode()
    );
    assert!(
        redis.contents(PREFIX).iter().any(|c| c.contains("|gone")),
        "the removal never reached Redis"
    );

    relay.mend();
    until("the bus is back", || a.hub.is_up()).await;
    until("the lost removal is sent again", || {
        redis.contents(PREFIX).iter().all(|c| !c.contains("gone"))
    })
    .await;
    let contents = redis.contents(PREFIX);
    assert!(
        contents
            .iter()
            .any(|c| c.starts_with(&format!("{PREFIX}:c:kept "))),
        "the open call stays registered: {contents:?}"
    );
}
