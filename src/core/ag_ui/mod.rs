//! AG-UI: a run of an AG-UI agent served from a Responses stream, sans-IO. [`input`] turns the
//! run's `RunAgentInput` into one streamed Responses request; the [`Translator`] turns the
//! gateway's stream into the run's AG-UI events.
//!
//! The translator is a presentation of the lifecycle model: the same SSE parser, dialect and
//! call tracker as the rewriter (so the same classification, `[failure]` rules and limits), but
//! no upstream event goes out as it came: each becomes AG-UI events or nothing. It is fed bytes
//! and `now` and returns bytes; its output does not depend on how the input was split.
//!
//! Invariants: `RUN_STARTED` first; every `TOOL_CALL_START` gets one `TOOL_CALL_END`, and a
//! gateway-run call's `TOOL_CALL_RESULT` comes after it; each gateway-run call's activity gets
//! exactly one final status; text and reasoning messages are closed before the run ends; the run
//! ends with exactly one `RUN_FINISHED` or `RUN_ERROR`, and nothing follows it. Memory: the
//! parser's `max_event_bytes`, the tracker's open calls and their bytes, one text and one
//! reasoning message open at a time, at most [`MAX_OBSERVATIONS`] observations waiting.

mod calls;
pub mod event;
mod ids;
pub mod input;
mod messages;
mod read;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::core::dialect::responses;
use crate::core::lifecycle::{Deltas, Phase, Progress, Tracker, Transition};
use crate::core::rewrite::{Observation, Stats};
use crate::core::settings::Settings;
use crate::core::sse::{Item, Parser};
pub use calls::ACTIVITY_TYPE;
use calls::Calls;
use event::{AgUiEvent, encode};
use ids::Ids;
use messages::Messages;
use read::Meaning;

/// Observations kept between two `take_observations` calls; more are dropped.
pub const MAX_OBSERVATIONS: usize = 1024;

/// How the gateway's response ended, as far as the stream has told.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ending {
    Open,
    Completed,
    Failed {
        message: String,
        code: Option<String>,
    },
}

/// One run's translator: the gateway's Responses stream in, the run's AG-UI events out.
pub struct Translator {
    settings: Arc<Settings>,
    thread_id: String,
    run_id: String,
    /// The tools the input declares: their calls are the client's to run.
    client_tools: Vec<String>,
    parser: Parser,
    tracker: Tracker,
    calls: Calls,
    messages: Messages,
    ending: Ending,
    /// `RUN_FINISHED` or `RUN_ERROR` went out: nothing more does.
    over: bool,
    /// The run's message and tool call ids.
    ids: Ids,
    out: Vec<u8>,
    /// When bytes last went out (for heartbeats).
    last_out: Option<Instant>,
    transitions: Vec<Transition>,
    observations: Vec<Observation>,
    stats: Stats,
}

impl Translator {
    pub fn new(settings: Arc<Settings>, thread_id: String, run_id: String) -> Self {
        let limits = settings.limits;
        let ids = Ids::new(&run_id);
        Translator {
            parser: Parser::new(limits.max_event_bytes),
            tracker: Tracker::new(limits.max_open_calls)
                .with_max_held_bytes(limits.max_open_call_bytes)
                .with_deltas(Deltas::Chunks),
            settings,
            thread_id,
            run_id,
            client_tools: Vec::new(),
            calls: Calls::default(),
            messages: Messages::default(),
            ending: Ending::Open,
            over: false,
            ids,
            out: Vec::new(),
            last_out: None,
            transitions: Vec::new(),
            observations: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// The names of the tools the run's input declares (the client runs their calls).
    pub fn with_client_tools(mut self, names: Vec<String>) -> Self {
        self.client_tools = names;
        self
    }

    /// The run's first event, `RUN_STARTED`.
    pub fn start(&mut self) -> Bytes {
        let (thread_id, run_id) = (self.thread_id.clone(), self.run_id.clone());
        self.emit(&AgUiEvent::RunStarted {
            thread_id: &thread_id,
            run_id: &run_id,
        });
        self.take()
    }

    /// The next bytes of the gateway's stream; returns the events they complete.
    pub fn feed(&mut self, chunk: &[u8], now: Instant) -> Bytes {
        self.parser.push(chunk);
        while let Some(item) = self.parser.next_item() {
            self.on_item(item, now);
        }
        self.take_at(now)
    }

    /// The gateway's stream ended: the run ends as its response did, or with `RUN_ERROR` when
    /// it ended without a terminal event.
    pub fn finish(&mut self, now: Instant) -> Bytes {
        self.parser.finish();
        while let Some(item) = self.parser.next_item() {
            self.on_item(item, now);
        }
        let ending = match std::mem::replace(&mut self.ending, Ending::Open) {
            Ending::Open => Ending::Failed {
                message: "the gateway's stream ended before its response did".into(),
                code: Some("stream_ended".into()),
            },
            ending => ending,
        };
        self.end_run(ending, now);
        self.take_at(now)
    }

    /// The run fails with `message` (the gateway answered with an error, or its stream broke):
    /// open calls and messages close, then `RUN_ERROR`.
    pub fn fail(&mut self, message: &str, code: Option<&str>, now: Instant) -> Bytes {
        let ending = Ending::Failed {
            message: message.to_string(),
            code: code.map(str::to_string),
        };
        self.end_run(ending, now);
        self.take_at(now)
    }

    /// A progress report for the open call `call_id`: an activity delta when it is a
    /// gateway-run call. A report for a call that is not open is dropped.
    pub fn progress(&mut self, call_id: &str, report: Progress, now: Instant) -> Bytes {
        if self.over {
            return Bytes::new();
        }
        let message = report.message.map(|m| self.settings.sanitizer.message(m));
        let report = Progress { message, ..report };
        match self.tracker.progress(call_id, report.clone(), now) {
            Some(transition) => {
                let call_id = call_id.to_string();
                self.observe(Observation::Progress { call_id, report });
                self.transitions.push(transition);
                self.render();
            }
            None => self.stats.progress_dropped += 1,
        }
        self.take_at(now)
    }

    /// When a heartbeat comment is due: while a call runs and no bytes went out for the
    /// settings' heartbeat interval (none when it is zero or the run is over).
    pub fn next_heartbeat(&self) -> Option<Instant> {
        let interval = self.settings.heartbeat;
        if interval.is_zero() || self.over || self.parser.is_mid_event_output() {
            return None;
        }
        let open = self.tracker.open_calls().iter();
        let earliest = open.filter_map(|c| c.running_since).min()?;
        let quiet_since = self.last_out.map_or(earliest, |t| t.max(earliest));
        Some(quiet_since + interval)
    }

    /// The upstream has been quiet: a heartbeat comment if one is due, else nothing.
    pub fn on_idle(&mut self, now: Instant) -> Bytes {
        if self.next_heartbeat().is_some_and(|at| at <= now) {
            self.out.extend_from_slice(crate::core::sse::HEARTBEAT);
        }
        self.take_at(now)
    }

    /// Whether the run has ended (`RUN_FINISHED` or `RUN_ERROR` went out).
    pub fn is_over(&self) -> bool {
        self.over
    }

    pub fn stats(&self) -> Stats {
        Stats {
            untracked: self.tracker.untracked(),
            ..self.stats
        }
    }

    /// Calls that started running and calls that finished, since the last call.
    pub fn take_observations(&mut self) -> std::vec::Drain<'_, Observation> {
        self.observations.drain(..)
    }

    fn take(&mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.out))
    }

    /// What is ready to go out, at `now`.
    fn take_at(&mut self, now: Instant) -> Bytes {
        if !self.out.is_empty() {
            self.last_out = Some(now);
        }
        self.take()
    }

    fn emit(&mut self, event: &AgUiEvent<'_>) {
        encode(event, &mut self.out);
        self.stats.injected += 1;
    }

    fn observe(&mut self, observation: Observation) {
        if self.observations.len() < MAX_OBSERVATIONS {
            self.observations.push(observation);
        }
    }

    fn on_item(&mut self, item: Item, now: Instant) {
        self.stats.events_in += 1;
        let event = match item {
            Item::Event(event) => event,
            Item::Oversize(bytes) | Item::Incomplete(bytes) => {
                self.stats.oversize_events += 1;
                self.stats.oversize_bytes += bytes.len() as u64;
                return;
            }
        };
        if self.over {
            return;
        }
        let Some(data) = event.data() else {
            return;
        };
        let Ok((kind, meaning)) = read::read(&data) else {
            // `[DONE]`, or what is not an event object.
            self.stats.unreadable += u64::from(&*data != b"[DONE]");
            return;
        };
        if kind == "response.created" && self.ending != Ending::Open {
            // A stream of several responses: the run goes on with the next one.
            if let Ending::Completed = self.ending {
                self.ending = Ending::Open;
            }
        }
        if responses::may_signal(kind.as_bytes())
            && let Ok(reading) = responses::read(&data)
            && let Some(signal) = reading.signal
        {
            let (settings, transitions) = (&self.settings, &mut self.transitions);
            let (classifier, failure) = (&settings.classifier, &settings.failure);
            self.tracker
                .on_signal(signal, now, classifier, failure, transitions);
        }
        self.on_meaning(meaning);
        self.render();
    }

    /// Text, reasoning and the response's end; calls are the tracker's.
    fn on_meaning(&mut self, meaning: Meaning<'_>) {
        let mut out = std::mem::take(&mut self.out);
        let mut written = 0;
        let mut emit = |event: &AgUiEvent<'_>| {
            encode(event, &mut out);
            written += 1;
        };
        self.messages.on(&meaning, &mut self.ids, &mut emit);
        self.out = out;
        self.stats.injected += written;
        match meaning {
            Meaning::Completed if self.ending == Ending::Open => self.ending = Ending::Completed,
            Meaning::Failed { message, code } if !matches!(self.ending, Ending::Failed { .. }) => {
                self.ending = Ending::Failed { message, code };
            }
            _ => {}
        }
    }

    fn close_messages(&mut self) {
        let out = &mut self.out;
        let mut written = 0;
        self.messages.close(&mut |event| {
            encode(event, out);
            written += 1;
        });
        self.stats.injected += written;
    }

    /// Renders the pending transitions and reports what they mean.
    fn render(&mut self) {
        let mut transitions = std::mem::take(&mut self.transitions);
        for transition in transitions.drain(..) {
            let mut out = std::mem::take(&mut self.out);
            let mut written = 0;
            let mut emit = |event: &AgUiEvent<'_>| {
                encode(event, &mut out);
                written += 1;
            };
            let ids = &mut self.ids;
            (self.calls).render(&transition, &self.client_tools, ids, &mut emit);
            self.out = out;
            self.stats.injected += written;
            self.report(transition);
        }
        self.transitions = transitions;
    }

    fn report(&mut self, transition: Transition) {
        let call = transition.call;
        match transition.phase {
            Phase::Running => self.observe(Observation::CallRunning {
                call_id: call.call_id,
                name: call.name,
                arguments: call.arguments,
            }),
            Phase::Finished {
                outcome,
                duration,
                output,
            } => {
                let error_kind = match &outcome {
                    crate::core::lifecycle::Outcome::Completed => None,
                    crate::core::lifecycle::Outcome::Failed(f) => {
                        Some(self.settings.failure.kind_of(f))
                    }
                };
                self.observe(Observation::CallFinished {
                    call_id: call.call_id,
                    name: call.name,
                    kind: call.kind,
                    rule: call.rule,
                    had_output: output.is_some(),
                    outcome: outcome.as_str(),
                    error_kind,
                    output: None,
                    duration,
                });
            }
            _ => {}
        }
    }

    /// Closes what is open (calls end `failed` for lack of output) and ends the run.
    fn end_run(&mut self, ending: Ending, now: Instant) {
        if self.over {
            return;
        }
        self.close_messages();
        self.tracker.finish(now, &mut self.transitions);
        self.render();
        let (thread_id, run_id) = (self.thread_id.clone(), self.run_id.clone());
        match ending {
            Ending::Completed => self.emit(&AgUiEvent::RunFinished {
                thread_id: &thread_id,
                run_id: &run_id,
            }),
            // `finish` and `fail` never end a run open; were one to, it ends without a reason.
            Ending::Open => self.emit(&AgUiEvent::RunError {
                message: "the run ended",
                code: None,
            }),
            Ending::Failed { message, code } => {
                let code = code.as_deref();
                self.emit(&AgUiEvent::RunError {
                    message: &message,
                    code,
                });
            }
        }
        self.over = true;
    }
}

#[cfg(test)]
mod edge_tests;
#[cfg(test)]
mod tests;
