//! The per-stream state machine of tool calls: which calls are open (by `call_id`, any number
//! in parallel, outputs in any order), when each started running, and how it ended.
//!
//! Invariant: every call that reports `Started` reports exactly one `Finished` — on its output,
//! at the stream's terminal event, or at [`Tracker::finish`] (EOF) — and none after that.
//! Memory is bounded: at most `max_open_calls` calls are tracked; later ones are left alone.

use std::borrow::Cow;
use std::time::Instant;

use super::{
    Call, Classifier, Failure, FailureRules, Kind, MAX_ARGUMENTS_BYTES, Outcome, OutputFacts,
    Phase, ToolOutput, Transition,
};

/// A `function_call` item as the upstream described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallItem<'a> {
    pub call_id: Cow<'a, str>,
    pub item_id: Option<Cow<'a, str>>,
    pub output_index: Option<u64>,
    pub name: Cow<'a, str>,
    pub arguments: Option<Cow<'a, str>>,
}

/// What an upstream event means for tool calls, whatever the dialect it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal<'a> {
    /// A `function_call` item was added; its arguments may still stream.
    CallAdded(CallItem<'a>),
    /// A piece of the arguments of the `function_call` item `item_id`.
    ArgumentsDelta {
        item_id: Cow<'a, str>,
        delta: Cow<'a, str>,
    },
    /// A `function_call` item is done: the gateway now runs the tool.
    CallDone(CallItem<'a>),
    /// The output of call `call_id` arrived.
    Output {
        call_id: Cow<'a, str>,
        facts: OutputFacts<'a>,
    },
    /// The response ended (`response.completed`/`failed`/`incomplete`, `error`).
    Terminal,
    /// A hosted item of the gateway's own (`mcp_call`, `web_search_call`, `file_search_call`)
    /// was added or is done. The tracker leaves it alone; profile `hosted` folds it into the
    /// item it shows for the same call (LiteLLM streams one after the model's `function_call`).
    Native(NativeItem<'a>),
}

/// A hosted item the gateway streamed itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeItem<'a> {
    pub item_id: Cow<'a, str>,
    /// `Mcp`, `WebSearch` or `FileSearch`.
    pub kind: Kind,
    pub name: Option<Cow<'a, str>>,
    pub arguments: Option<Cow<'a, str>>,
    /// `output_item.done` (else `.added`).
    pub done: bool,
    /// Its result, as far as it has one (status, error, output).
    pub facts: OutputFacts<'a>,
}

impl Signal<'_> {
    /// Whether events caused by this signal go before the upstream event that carried it
    /// (closing events precede the output or the terminal event) rather than after it.
    pub fn injects_before(&self) -> bool {
        matches!(self, Signal::Output { .. } | Signal::Terminal)
    }
}

/// What an `ArgumentsDelta` transition carries: what the stream's profiles render of it. A
/// delta never copies the arguments so far unless a profile reads them (a call streamed in
/// small deltas would otherwise cost the square of its length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deltas {
    /// No transition for a delta (no profile renders one).
    Off,
    /// The chunk and the call, its `arguments` left empty.
    Chunks,
    /// The chunk and the call with its arguments so far while they are at most `max_bytes`
    /// long; past that, as `Chunks`.
    WithArguments { max_bytes: usize },
}

#[derive(Debug, Clone)]
pub struct Tracker {
    open: Vec<Call>,
    max_open_calls: usize,
    deltas: Deltas,
    /// Calls not tracked because `max_open_calls` were already open.
    pub untracked_calls: u64,
    /// Calls started at their done, never added (rule `call_done_not_added`).
    pub done_not_added: u64,
    /// Calls not tracked because a call with their item id was open (`call_item_id_repeated`).
    pub item_id_repeated: u64,
}

impl Tracker {
    pub fn new(max_open_calls: usize) -> Self {
        Tracker {
            open: Vec::new(),
            max_open_calls,
            deltas: Deltas::WithArguments {
                max_bytes: MAX_ARGUMENTS_BYTES,
            },
            untracked_calls: 0,
            done_not_added: 0,
            item_id_repeated: 0,
        }
    }

    /// Sets what argument deltas report (the default carries everything).
    pub fn with_deltas(mut self, deltas: Deltas) -> Self {
        self.deltas = deltas;
        self
    }

    /// The calls started and not yet finished, in the order they started.
    pub fn open_calls(&self) -> &[Call] {
        &self.open
    }

    /// Applies `signal`, appending the transitions it causes to `out`.
    pub fn on_signal(
        &mut self,
        signal: Signal<'_>,
        now: Instant,
        classifier: &Classifier,
        failure: &FailureRules,
        out: &mut Vec<Transition>,
    ) {
        match signal {
            Signal::CallAdded(item) => {
                self.start(item, now, classifier, out);
            }
            Signal::ArgumentsDelta { item_id, delta } => {
                let call = self.open.iter_mut().find(|c| c.item_id == item_id);
                if let Some(call) = call
                    && call.running_since.is_none()
                    && append_capped(call, &delta)
                    && self.deltas != Deltas::Off
                {
                    out.push(Transition {
                        call: delta_view(call, self.deltas),
                        phase: Phase::ArgumentsDelta {
                            chunk: delta.into_owned(),
                        },
                    });
                }
            }
            Signal::CallDone(item) => {
                let arguments = item.arguments.clone();
                let index = match self.position(&item.call_id) {
                    Some(i) => Some(i),
                    // The added event was missed (e.g. it was oversize): start the call now.
                    None => {
                        let started = self.start(item, now, classifier, out);
                        self.done_not_added += u64::from(started.is_some());
                        started
                    }
                };
                if let Some(call) = index.map(|i| &mut self.open[i])
                    && call.running_since.is_none()
                {
                    if let Some(arguments) = arguments {
                        call.arguments.clear();
                        call.arguments_truncated = false;
                        append_capped(call, &arguments);
                    }
                    call.running_since = Some(now);
                    out.push(Transition {
                        call: call.clone(),
                        phase: Phase::Running,
                    });
                }
            }
            Signal::Output { call_id, facts } => {
                if let Some(i) = self.position(&call_id) {
                    let call = self.open.remove(i);
                    let outcome = failure.judge(&facts);
                    let output = ToolOutput {
                        text: facts.texts.join("\n"),
                        error: facts.error.map(Cow::into_owned),
                    };
                    out.push(finished(call, outcome, Some(output), now));
                }
            }
            Signal::Terminal => self.finish(now, out),
            Signal::Native(_) => {}
        }
    }

    /// Closes every open call as failed for lack of output (the stream ended).
    pub fn finish(&mut self, now: Instant, out: &mut Vec<Transition>) {
        for call in self.open.drain(..) {
            out.push(finished(
                call,
                Outcome::Failed(Failure::NoOutput),
                None,
                now,
            ));
        }
    }

    /// Reports every running call as still running (at a heartbeat).
    pub fn still_running(&self, now: Instant, out: &mut Vec<Transition>) {
        for call in &self.open {
            if let Some(since) = call.running_since {
                out.push(Transition {
                    call: call.clone(),
                    phase: Phase::StillRunning {
                        elapsed: now.saturating_duration_since(since),
                    },
                });
            }
        }
    }

    /// The open call `call_id`, if any.
    pub fn call(&self, call_id: &str) -> Option<&Call> {
        self.position(call_id).map(|i| &self.open[i])
    }

    /// Records the `output_index` the companion item of open call `call_id` was given.
    pub fn set_companion(&mut self, call_id: &str, index: u64) {
        if let Some(i) = self.position(call_id) {
            self.open[i].companion = Some(index);
        }
    }

    /// Records that open call `call_id` is shown as hosted item `id` at `output_index` `index`.
    pub fn set_hosted(&mut self, call_id: &str, index: u64, id: &std::sync::Arc<str>) {
        if let Some(i) = self.position(call_id) {
            self.open[i].companion = Some(index);
            self.open[i].hosted_id = Some(id.clone());
        }
    }

    fn position(&self, call_id: &str) -> Option<usize> {
        self.open.iter().position(|c| c.call_id == call_id)
    }

    fn start(
        &mut self,
        item: CallItem<'_>,
        now: Instant,
        classifier: &Classifier,
        out: &mut Vec<Transition>,
    ) -> Option<usize> {
        if self.position(&item.call_id).is_some() {
            return None;
        }
        // Injected events name the call by its item id (the item the client has): a second open
        // call with the same item id would be indistinguishable from the first.
        let item_id = item.item_id.as_deref().unwrap_or(&item.call_id);
        if self.open.iter().any(|c| c.item_id == item_id) {
            self.item_id_repeated += 1;
            return None;
        }
        let (kind, rule) = classifier.classify_rule(&item.name);
        if kind == Kind::Ignore {
            return None;
        }
        if self.open.len() >= self.max_open_calls {
            self.untracked_calls += 1;
            return None;
        }
        let call = Call {
            item_id: item
                .item_id
                .unwrap_or(Cow::Borrowed(&item.call_id))
                .into_owned(),
            call_id: item.call_id.into_owned(),
            output_index: item.output_index,
            companion: None,
            hosted_id: None,
            name: item.name.into_owned(),
            kind,
            rule,
            arguments: String::new(),
            arguments_truncated: false,
            added_at: now,
            running_since: None,
        };
        out.push(Transition {
            call: call.clone(),
            phase: Phase::Started,
        });
        // One more place, not twice as many: most streams have one or two calls open at once,
        // and an open stream keeps what this holds.
        self.open.reserve_exact(1);
        self.open.push(call);
        Some(self.open.len() - 1)
    }
}

fn finished(call: Call, outcome: Outcome, output: Option<ToolOutput>, now: Instant) -> Transition {
    let since = call.running_since.unwrap_or(call.added_at);
    Transition {
        phase: Phase::Finished {
            outcome,
            duration: now.saturating_duration_since(since),
            output,
        },
        call,
    }
}

/// The call as an `ArgumentsDelta` transition carries it under `deltas`: its arguments copied
/// only while a profile reads them and they are short; else cut to nothing (and so marked
/// `arguments_truncated`).
fn delta_view(call: &mut Call, deltas: Deltas) -> Call {
    match deltas {
        Deltas::WithArguments { max_bytes } if call.arguments.len() <= max_bytes => call.clone(),
        _ => {
            let arguments = std::mem::take(&mut call.arguments);
            let mut view = call.clone();
            view.arguments_truncated = true;
            call.arguments = arguments;
            view
        }
    }
}

/// Appends to the call's arguments up to [`MAX_ARGUMENTS_BYTES`]; false once they are cut.
fn append_capped(call: &mut Call, text: &str) -> bool {
    if call.arguments_truncated {
        return false;
    }
    if call.arguments.len() + text.len() > MAX_ARGUMENTS_BYTES {
        call.arguments_truncated = true;
        return false;
    }
    call.arguments.push_str(text);
    true
}

#[cfg(test)]
mod tests {
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
            output: Some(crate::lifecycle::ToolOutput::default()),
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

    /// Issue 28: every delta once cloned the arguments so far (1 MiB in 4-byte deltas: 2.6 s);
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
        assert_eq!(r.tracker.untracked_calls, 1);
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
}
