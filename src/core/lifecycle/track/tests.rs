//! The tracker's unit tests: lifecycles, limits, what the open calls hold.

use std::time::Duration;

use super::*;

fn item(call_id: &'static str, name: &'static str) -> CallItem<'static> {
    CallItem {
        call_id: call_id.into(),
        item_id: Some(format!("fc_{call_id}").into()),
        output_index: Some(1),
        name: name.into(),
        arguments: None,
    }
}

fn output(call_id: &'static str) -> Signal<'static> {
    Signal::Output {
        call_id: call_id.into(),
        facts: OutputFacts::default(),
    }
}

struct Run {
    tracker: Tracker,
    classifier: Classifier,
    failure: FailureRules,
    t0: Instant,
}

impl Run {
    fn new(max: usize) -> Self {
        Run {
            tracker: Tracker::new(max),
            classifier: Classifier::default(),
            failure: FailureRules::default(),
            t0: Instant::now(),
        }
    }
    fn send(&mut self, s: Signal<'_>, ms: u64) -> Vec<(String, Phase)> {
        let mut out = Vec::new();
        let now = self.t0 + Duration::from_millis(ms);
        self.tracker
            .on_signal(s, now, &self.classifier, &self.failure, &mut out);
        out.into_iter().map(|t| (t.call.call_id, t.phase)).collect()
    }
}

fn done(ms: u64) -> Phase {
    Phase::Finished {
        outcome: Outcome::Completed,
        duration: Duration::from_millis(ms),
        output: Some(crate::core::lifecycle::ToolOutput::default()),
    }
}

/// The bytes of arguments the transitions of a call streamed in `n` 4-byte deltas carry,
/// and how many delta transitions there were, under `deltas`.
fn carried(deltas: Deltas, n: usize) -> (usize, usize, String) {
    let mut r = Run::new(8);
    r.tracker = Tracker::new(8).with_deltas(deltas);
    let mut out = Vec::new();
    let mut signal = |s: Signal<'_>, out: &mut Vec<Transition>| {
        r.tracker.on_signal(s, r.t0, &r.classifier, &r.failure, out)
    };
    signal(Signal::CallAdded(item("a", "mcp_x")), &mut out);
    for _ in 0..n {
        let delta = Signal::ArgumentsDelta {
            item_id: "fc_a".into(),
            delta: "abcd".into(),
        };
        signal(delta, &mut out);
    }
    signal(Signal::CallDone(item("a", "mcp_x")), &mut out);
    let is_delta = |t: &&Transition| matches!(t.phase, Phase::ArgumentsDelta { .. });
    let deltas = out.iter().filter(is_delta).count();
    let bytes = out
        .iter()
        .filter(is_delta)
        .map(|t| t.call.arguments.len())
        .sum();
    let running = out.iter().find(|t| t.phase == Phase::Running);
    (
        deltas,
        bytes,
        running.expect("running").call.arguments.clone(),
    )
}

/// Every delta once cloned the arguments so far (1 MiB in 4-byte deltas: 2.6 s);
/// a delta now carries them only while a profile reads them and they are short.
#[test]
fn argument_deltas_copy_the_arguments_only_as_far_as_a_profile_reads_them() {
    let n = 16 * 1024; // 64 KiB of arguments
    let whole = "abcd".repeat(n);
    assert_eq!(carried(Deltas::Off, n), (0, 0, whole.clone()));
    assert_eq!(carried(Deltas::Chunks, n), (n, 0, whole.clone()));
    let (count, bytes, running) = carried(Deltas::WithArguments { max_bytes: 400 }, n);
    assert_eq!((count, running), (n, whole));
    // 4 + 8 + … + 400: the first 100 deltas carry their arguments, later ones none.
    assert_eq!(bytes, (1..=100).map(|k| 4 * k).sum::<usize>());
}

#[test]
fn parallel_calls_close_in_any_order_with_durations() {
    let mut r = Run::new(8);
    assert_eq!(
        r.send(Signal::CallAdded(item("a", "web_search")), 0).len(),
        1
    );
    r.send(Signal::CallAdded(item("b", "file_search")), 1);
    assert_eq!(
        r.send(Signal::CallDone(item("a", "web_search")), 10),
        vec![("a".into(), Phase::Running)]
    );
    r.send(Signal::CallDone(item("b", "file_search")), 20);
    assert_eq!(r.send(output("b"), 70), vec![("b".into(), done(50))]);
    assert_eq!(r.send(output("a"), 110), vec![("a".into(), done(100))]);
    assert!(r.send(output("a"), 120).is_empty(), "closed exactly once");
    assert!(r.send(Signal::Terminal, 130).is_empty());
}

#[test]
fn terminal_and_finish_close_what_is_open() {
    let mut r = Run::new(8);
    r.send(Signal::CallAdded(item("a", "web_search")), 0);
    r.send(Signal::CallDone(item("a", "web_search")), 0);
    let closed = r.send(Signal::Terminal, 5);
    assert!(matches!(
        &closed[..],
        [(
            _,
            Phase::Finished {
                outcome: Outcome::Failed(Failure::NoOutput),
                ..
            }
        )]
    ));
    r.send(Signal::CallAdded(item("b", "x")), 6);
    let mut out = Vec::new();
    r.tracker.finish(r.t0, &mut out);
    assert_eq!(out.len(), 1);
    assert!(r.tracker.open_calls().is_empty());
}

#[test]
fn done_without_added_starts_the_call_and_duplicates_are_ignored() {
    let mut r = Run::new(8);
    let phases: Vec<_> = r
        .send(Signal::CallDone(item("a", "web_search")), 0)
        .into_iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(phases, vec![Phase::Started, Phase::Running]);
    assert!(
        r.send(Signal::CallAdded(item("a", "web_search")), 1)
            .is_empty()
    );
    assert!(
        r.send(Signal::CallDone(item("a", "web_search")), 1)
            .is_empty()
    );
    // Another call id on an item already open: injected events could not tell them apart.
    let mut same_item = item("b", "web_search");
    same_item.item_id = Some("fc_a".into());
    assert!(r.send(Signal::CallAdded(same_item), 2).is_empty());
}

#[test]
fn ignore_kind_and_the_open_call_limit() {
    let mut r = Run::new(1);
    r.classifier = Classifier::new(vec![(vec!["secret_*".into()], Kind::Ignore)]).expect("ok");
    assert!(
        r.send(Signal::CallAdded(item("a", "secret_x")), 0)
            .is_empty()
    );
    assert_eq!(
        r.send(Signal::CallAdded(item("b", "web_search")), 0).len(),
        1
    );
    assert!(
        r.send(Signal::CallAdded(item("c", "web_search")), 0)
            .is_empty()
    );
    assert_eq!(r.tracker.untracked().open_calls, 1);
}

#[test]
fn names_and_ids_over_their_caps_are_left_alone() {
    let mut r = Run::new(8);
    let long = |n: usize| -> &'static str { Box::leak("x".repeat(n).into_boxed_str()) };
    let named = item("a", long(MAX_NAME_BYTES + 1));
    assert!(r.send(Signal::CallAdded(named), 0).is_empty());
    assert!(
        r.send(Signal::CallDone(item("b", long(3 << 20))), 0)
            .is_empty()
    );
    assert_eq!(r.tracker.untracked().name_bytes, 2);
    assert!(
        r.send(Signal::CallAdded(item(long(MAX_ID_BYTES + 1), "x")), 0)
            .is_empty()
    );
    let mut item_id = item("c", "x");
    item_id.item_id = Some(long(MAX_ID_BYTES + 1).into());
    assert!(r.send(Signal::CallAdded(item_id), 0).is_empty());
    assert_eq!(r.tracker.untracked().id_bytes, 2);
    assert_eq!(r.tracker.held_bytes(), 0);
    // At the caps: followed.
    let mut at_caps = item(long(MAX_ID_BYTES), long(MAX_NAME_BYTES));
    at_caps.item_id = Some(long(MAX_ID_BYTES).into());
    assert_eq!(r.send(Signal::CallAdded(at_caps), 0).len(), 1);
    assert_eq!(r.tracker.untracked().calls(), 4);
}

/// Each open call holds its arguments once, at their length once they are final; the
/// open calls hold at most the budget together: a call that would not fit is left alone,
/// one already shown goes on without its arguments; what a call held comes back when it
/// ends.
#[test]
fn open_calls_hold_one_copy_of_their_arguments_within_the_budget() {
    let kib = |n: usize| format!("{{\"q\":\"{}\"}}", "a".repeat(n * 1024 - 8));
    let mut r = Run::new(64);
    r.tracker = Tracker::new(64).with_max_held_bytes(250 * 1024);
    let done = |call_id: &'static str, arguments: String| {
        let mut done = item(call_id, "web_search");
        done.arguments = Some(arguments.into());
        Signal::CallDone(done)
    };
    let strings = |call_id: &str| "web_search".len() + 2 * call_id.len() + 3;
    // Two calls of 100 KiB: held once each, at their length.
    for id in ["a", "b"] {
        r.send(Signal::CallAdded(item(id, "web_search")), 0);
        r.send(done(id, kib(100)), 1);
    }
    assert_eq!(r.tracker.held_bytes(), 2 * (100 * 1024 + strings("a")));
    // Streamed in small deltas: held at most twice (a String's doubling), and exactly once
    // the final arguments replace them.
    r.send(Signal::CallAdded(item("c", "web_search")), 2);
    let before = r.tracker.held_bytes();
    for _ in 0..(40 * 1024 / 8) {
        let delta = Signal::ArgumentsDelta {
            item_id: "fc_c".into(),
            delta: "abcdefgh".into(),
        };
        r.send(delta, 2);
    }
    let streamed = r.tracker.held_bytes() - before;
    assert!((40 * 1024..=80 * 1024).contains(&streamed), "{streamed}");
    r.send(done("c", kib(40)), 3);
    assert_eq!(r.tracker.held_bytes(), before + 40 * 1024);
    // A fourth call's arguments would pass the budget: shown, without them.
    r.send(Signal::CallAdded(item("d", "web_search")), 4);
    let running = r.send(done("d", kib(100)), 4);
    assert_eq!(running, vec![("d".to_string(), Phase::Running)]);
    assert_eq!(r.tracker.call("d").expect("open").arguments, "");
    assert!(r.tracker.call("d").expect("open").arguments_truncated);
    assert_eq!(r.tracker.untracked().arguments_dropped, 1);
    // A call done without added whose arguments would not fit: left alone.
    assert!(r.send(done("e", kib(100)), 5).is_empty());
    assert_eq!(r.tracker.untracked().held_bytes, 1);
    assert!(r.tracker.held_bytes() <= 250 * 1024);
    // What the calls held comes back as they end.
    r.send(output("a"), 6);
    let left = before + 40 * 1024 + strings("d") - (100 * 1024 + strings("a"));
    assert_eq!(r.tracker.held_bytes(), left);
    r.send(Signal::Terminal, 7);
    assert_eq!(r.tracker.held_bytes(), 0);
    // Arguments over the per-call cap are never held, whatever the budget.
    let mut r = Run::new(8);
    r.send(Signal::CallAdded(item("f", "web_search")), 0);
    r.send(done("f", kib(1025)), 0);
    assert_eq!(r.tracker.held_bytes(), strings("f"));
    assert_eq!(r.tracker.untracked().arguments_dropped, 1);
}

#[test]
fn arguments_stream_in_then_the_final_ones_win() {
    let mut r = Run::new(8);
    r.send(Signal::CallAdded(item("a", "web_search")), 0);
    let delta = |d: &'static str| Signal::ArgumentsDelta {
        item_id: "fc_a".into(),
        delta: d.into(),
    };
    let out = r.send(delta("{\"q\":"), 1);
    assert!(matches!(&out[..], [(_, Phase::ArgumentsDelta { chunk })] if chunk == "{\"q\":"));
    r.send(delta("\"x\"}"), 2);
    assert_eq!(r.tracker.open_calls()[0].arguments, "{\"q\":\"x\"}");
    let mut done = item("a", "web_search");
    done.arguments = Some("{\"q\":\"y\"}".into());
    r.send(Signal::CallDone(done), 3);
    assert_eq!(r.tracker.open_calls()[0].arguments, "{\"q\":\"y\"}");
    assert!(
        r.send(delta("late"), 4).is_empty(),
        "no deltas once running"
    );
}
