//! The neutral tool-lifecycle model: what a tool call is, how it ended, and the transitions the
//! tracker reports. Profiles render these; nothing here knows about any wire format.

pub mod classify;
pub mod track;

use std::time::{Duration, Instant};

use serde::Deserialize;

pub use classify::{Classifier, FailureRules, OutputFacts};
pub use track::{Signal, Tracker};

/// What kind of tool a call is, decided by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Mcp,
    WebSearch,
    FileSearch,
    Function,
    /// No lifecycle events in any profile, and not tracked at all.
    Ignore,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Mcp => "mcp",
            Kind::WebSearch => "web_search",
            Kind::FileSearch => "file_search",
            Kind::Function => "function",
            Kind::Ignore => "ignore",
        }
    }
}

/// One tool call the stream has shown, as far as it has got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub call_id: String,
    /// The `function_call` item's id (the `call_id` when the item had none).
    pub item_id: String,
    pub output_index: Option<u64>,
    pub name: String,
    pub kind: Kind,
    pub added_at: Instant,
    /// Set when the call's arguments were complete and the gateway began to run it.
    pub running_since: Option<Instant>,
}

/// Why a call counts as failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The output item's `status` was `failed` or `incomplete`.
    Status(String),
    /// The output item carried a non-null `error`.
    Error,
    /// The output text matched `[failure] output_patterns[i]`.
    Pattern(usize),
    /// The stream ended (terminal event or EOF) before the call's output arrived.
    NoOutput,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Failed(Failure),
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// A step in a call's life, reported by the [`Tracker`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The call item appeared (arguments may still stream).
    Started,
    /// The arguments are complete: the gateway is running the tool.
    Running,
    /// The call is over; `duration` runs from `Running` (or `Started` if it never ran).
    Finished {
        outcome: Outcome,
        duration: Duration,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub call: Call,
    pub phase: Phase,
}
