//! What a stream reports besides its bytes: [`Observation`]s for metrics, logs and spans, taken
//! by the glue between chunks, and the [`Stats`] of the stream so far.
//!
//! Memory: at most [`MAX_OBSERVATIONS`] observations wait to be taken; more are dropped, so a
//! caller that never takes them (the CLI) holds a bounded amount.

use std::time::Duration;

use crate::core::lifecycle::{FailureRules, Kind, Outcome, Phase, Progress, Transition, Untracked};
use crate::core::rules::Violations;

/// Observations kept for the glue between two `take_observations` calls.
const MAX_OBSERVATIONS: usize = 1024;

/// Something worth a metric, a log line or a span, reported by the rewriter's
/// `take_observations`.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    Injected(&'static str),
    /// A call's arguments are complete: the gateway runs it now (it may report progress).
    CallRunning {
        call_id: String,
        name: String,
        arguments: String,
    },
    CallFinished {
        call_id: String,
        name: String,
        kind: Kind,
        /// The `[[tools]]` rule that classified the call; `None`: a built-in rule or the fallback.
        rule: Option<usize>,
        /// Whether its output arrived in the stream, i.e. the gateway ran the tool itself.
        had_output: bool,
        outcome: &'static str,
        /// Why it failed, as the profiles' `error.kind` says it (`status_failed`, a
        /// `[failure.kinds]` name, `no_output`, …); `None` when it completed.
        error_kind: Option<String>,
        /// The output text, only when the rewriter was asked for it
        /// (`with_output_observations`).
        output: Option<String>,
        duration: Duration,
    },
    /// A progress report went out for a call (its message already sanitized).
    Progress {
        call_id: String,
        report: Progress,
    },
    /// A call shown as hosted item `id` got its output: the gateway's own pair of items, for
    /// the next turn (profile `hosted`).
    HostedPair {
        id: String,
        /// The `function_call` item as the gateway sent it done.
        call_item: String,
        /// The `function_call_output` item as the gateway sent it.
        output_item: String,
    },
    /// The gateway changed its response's id after `response.created` (LiteLLM does): the
    /// client was shown `shown` throughout, the gateway knows the response as `upstream` (for
    /// the next turn's `previous_response_id`).
    ResponseId {
        shown: String,
        upstream: String,
    },
}

/// Counters for one stream, for logs and metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Complete upstream event blocks seen (comments and oversize events included).
    pub events_in: u64,
    pub injected: u64,
    /// Upstream events whose `sequence_number` was rewritten.
    pub renumbered: u64,
    /// Events forwarded uninterpreted because their data could not be read (fail-open).
    pub unreadable: u64,
    /// Events over `max_event_bytes`, forwarded uninterpreted, and their bytes.
    pub oversize_events: u64,
    pub oversize_bytes: u64,
    /// Calls left without a terminal event because the stream ended inside an oversize event,
    /// where nothing can be injected without corrupting it.
    pub unclosed_at_eof: u64,
    /// Companion items left out of a `response.output` list (over the per-response budget).
    pub unlisted_companions: u64,
    /// Progress reports for calls that were not open (any more).
    pub progress_dropped: u64,
    /// Progress reports replaced by a newer one before they went out.
    pub progress_coalesced: u64,
    /// The stream rules the upstream broke (and what was repaired).
    pub violations: Violations,
    /// Calls left as the upstream sent them for a per-stream limit, and calls shown without
    /// their arguments.
    pub untracked: Untracked,
    /// Hosted calls whose pair could not go to the next-turn store: their arguments were not
    /// held (over a limit), so the gateway's call item could not be given back whole.
    pub pairs_unkept: u64,
    /// Injected events left out: the upstream's `sequence_number`s left none free under
    /// `u64::MAX`.
    pub numbers_exhausted: u64,
}

/// The observations waiting to be taken and the counters the rewriter keeps itself (the
/// sub-machines keep theirs, added in at `Rewriter::stats`).
#[derive(Debug, Default)]
pub struct Report {
    observations: Vec<Observation>,
    pub stats: Stats,
    /// Whether `CallFinished` carries the output text (tracing with payloads): off, the text
    /// is dropped where it always was, so nothing holds it longer.
    pub with_outputs: bool,
    /// Whether the last item was a piece of an oversize event that has not ended yet.
    in_oversize: bool,
}

impl Report {
    pub fn observe(&mut self, observation: Observation) {
        if self.observations.len() < MAX_OBSERVATIONS {
            self.observations.push(observation);
        }
    }

    /// What was observed since the last call; `None` when nothing was (most events), which
    /// costs less than draining an empty list at every event.
    pub fn take(&mut self) -> Option<std::vec::Drain<'_, Observation>> {
        (!self.observations.is_empty()).then(|| self.observations.drain(..))
    }

    /// A piece of an oversize event (or an unterminated tail) went out; `continues`: its event
    /// has not ended yet.
    pub fn oversize(&mut self, bytes: usize, continues: bool) {
        if !self.in_oversize {
            self.stats.oversize_events += 1;
        }
        self.in_oversize = continues;
        self.stats.oversize_bytes += bytes as u64;
    }

    /// A transition was rendered: its call's progress, start of running or end, if any.
    pub fn transition(&mut self, transition: Transition, failure: &FailureRules) {
        let call = transition.call;
        match transition.phase {
            Phase::Progress { report, .. } => self.observe(Observation::Progress {
                call_id: call.call_id,
                report,
            }),
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
                    Outcome::Completed => None,
                    Outcome::Failed(failure_of) => Some(failure.kind_of(failure_of)),
                };
                self.observe(Observation::CallFinished {
                    call_id: call.call_id,
                    name: call.name,
                    kind: call.kind,
                    rule: call.rule,
                    had_output: output.is_some(),
                    outcome: outcome.as_str(),
                    error_kind,
                    output: output.filter(|_| self.with_outputs).map(|o| o.text),
                    duration,
                });
            }
            _ => {}
        }
    }
}
