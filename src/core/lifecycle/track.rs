//! The per-stream state machine of tool calls: which calls are open (by `call_id`, any number
//! in parallel, outputs in any order), when each started running, and how it ended.
//!
//! Invariant: every call that reports `Started` reports exactly one `Finished` — on its output,
//! at the stream's terminal event, or at [`Tracker::finish`] (EOF) — and none after that.
//!
//! Memory is bounded whatever the upstream sends: at most `max_open_calls` calls are tracked,
//! none whose name is over [`MAX_NAME_BYTES`] or whose call id or item id is over
//! [`MAX_ID_BYTES`], and the open calls hold at most `max_held_bytes` together (their names, ids
//! and arguments, counted at their allocated size: [`Tracker::held_bytes`]). A call past any of
//! these is left alone (its events pass as the upstream sent them) and counted in
//! [`Untracked`]; a call already shown whose arguments would pass the budget (or
//! [`MAX_ARGUMENTS_BYTES`]) is followed on without them. The arguments are held once, here:
//! what else follows a call (the hosted items' kept pairs) keeps only what is not arguments.

use std::borrow::Cow;
use std::time::Instant;

use super::call::{
    Call, Failure, Kind, MAX_ARGUMENTS_BYTES, Outcome, Phase, Progress, ToolOutput, Transition,
};
use super::classify::{Classifier, FailureRules, OutputFacts};

mod held;
use held::{Held, Limit};
pub use held::{MAX_ID_BYTES, MAX_LEFT_ALONE, MAX_NAME_BYTES, Untracked, held_by};

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
    /// What the open calls hold, within their budget, and the calls left alone for a limit.
    held: Held,
    deltas: Deltas,
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
            held: Held::new(usize::MAX),
            deltas: Deltas::WithArguments {
                max_bytes: MAX_ARGUMENTS_BYTES,
            },
            done_not_added: 0,
            item_id_repeated: 0,
        }
    }

    /// Bounds what the open calls hold together (`[limits] max_open_call_bytes`; the default
    /// is no bound).
    pub fn with_max_held_bytes(mut self, max_held_bytes: usize) -> Self {
        self.held = Held::new(max_held_bytes);
        self
    }

    /// What the open calls hold now ([`held_by`] summed): at most `max_held_bytes`.
    pub fn held_bytes(&self) -> usize {
        self.held.bytes()
    }

    /// Calls not tracked for a limit, and calls followed without their arguments.
    pub fn untracked(&self) -> Untracked {
        self.held.untracked
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
                self.start(item, 0, now, classifier, out);
            }
            Signal::ArgumentsDelta { item_id, delta } => {
                let i = self.open.iter().position(|c| c.item_id == item_id);
                if let Some(i) = i
                    && self.open[i].running_since.is_none()
                    && self.held.append(&mut self.open[i], &delta)
                    && self.deltas != Deltas::Off
                {
                    out.push(Transition {
                        call: delta_view(&mut self.open[i], self.deltas),
                        phase: Phase::ArgumentsDelta {
                            chunk: delta.into_owned(),
                        },
                    });
                }
            }
            Signal::CallDone(mut item) => {
                let arguments = item.arguments.take();
                let index = match self.position(&item.call_id) {
                    Some(i) => Some(i),
                    // The added event was missed (e.g. it was oversize): start the call now,
                    // if its arguments fit too.
                    None => {
                        let length = arguments.as_deref().map_or(0, str::len);
                        let started = self.start(item, length, now, classifier, out);
                        self.done_not_added += u64::from(started.is_some());
                        started
                    }
                };
                if let Some(i) = index
                    && self.open[i].running_since.is_none()
                {
                    if let Some(arguments) = arguments {
                        self.held.set_arguments(&mut self.open[i], arguments);
                    }
                    let call = &mut self.open[i];
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
                    self.held.release(&call);
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
        self.held.release_all();
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

    /// A progress `report` for open call `call_id` at `now`, if it is open.
    pub fn progress(&self, call_id: &str, report: Progress, now: Instant) -> Option<Transition> {
        let call = self.call(call_id)?;
        let since = call.running_since.unwrap_or(call.added_at);
        let elapsed = now.saturating_duration_since(since);
        let phase = Phase::Progress { elapsed, report };
        let call = call.clone();
        Some(Transition { call, phase })
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

    /// Starts tracking `item`, whose arguments will take `arguments_bytes`, unless a limit
    /// leaves it alone.
    fn start(
        &mut self,
        item: CallItem<'_>,
        arguments_bytes: usize,
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
        // Before the name is matched against every rule: a megabyte name costs nothing more.
        if item.name.len() > MAX_NAME_BYTES {
            self.held.leave(&item.call_id, Limit::NameBytes);
            return None;
        }
        if item.call_id.len() > MAX_ID_BYTES || item_id.len() > MAX_ID_BYTES {
            self.held.leave(&item.call_id, Limit::IdBytes);
            return None;
        }
        let (kind, rule) = classifier.classify_rule(&item.name);
        if kind == Kind::Ignore {
            return None;
        }
        if self.open.len() >= self.max_open_calls {
            self.held.leave(&item.call_id, Limit::OpenCalls);
            return None;
        }
        let strings = item.name.len() + item.call_id.len() + item_id.len();
        if strings + arguments_bytes > self.held.room() {
            self.held.leave(&item.call_id, Limit::HeldBytes);
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
        self.held.take(&call);
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

#[cfg(test)]
mod tests;
