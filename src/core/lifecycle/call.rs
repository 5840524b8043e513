//! The neutral tool-lifecycle model: what a tool call is, how it ended, and the transitions the
//! tracker reports. Profiles render these; nothing here knows about any wire format.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

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
    /// The `output_index` of the call's companion item in the client's stream, once the
    /// rewriter gave it one (profile `openai`).
    pub companion: Option<u64>,
    /// The id of the call's hosted item, once the rewriter made it one (profile `hosted`).
    pub hosted_id: Option<Arc<str>>,
    pub name: String,
    pub kind: Kind,
    /// The `[[tools]]` rule of the config that classified the call (for its templates), if any.
    pub rule: Option<usize>,
    /// The arguments as streamed so far, or final once the call item is done: the one copy a
    /// stream holds. At most [`MAX_ARGUMENTS_BYTES`], and within the stream's
    /// `max_open_call_bytes`: past either they are dropped (empty) and `arguments_truncated`
    /// is set.
    pub arguments: String,
    pub arguments_truncated: bool,
    pub added_at: Instant,
    /// Set when the call's arguments were complete and the gateway began to run it.
    pub running_since: Option<Instant>,
}

/// Arguments kept per call, so a stream's memory stays bounded whatever its calls carry.
pub const MAX_ARGUMENTS_BYTES: usize = 1 << 20;

/// What the tool returned, as far as profiles need it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    /// The output text (a string output, or the text parts of a list output joined by `\n`).
    pub text: String,
    /// The raw JSON of the output item's non-null `error`, if any.
    pub error: Option<String>,
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

/// A step in a call's life, reported by the tracker.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// The call item appeared (arguments may still stream).
    Started,
    /// A piece of the arguments arrived (already appended to `Call::arguments`, which the
    /// transition carries only as far as the tracker's `Deltas` say).
    ArgumentsDelta { chunk: String },
    /// The arguments are complete: the gateway is running the tool.
    Running,
    /// The tool is still running (reported at each heartbeat).
    StillRunning { elapsed: Duration },
    /// The tool reported how far it has got (out-of-band progress).
    Progress { elapsed: Duration, report: Progress },
    /// The call is over; `duration` runs from `Running` (or `Started` if it never ran); `output`
    /// is what the tool returned (`None` when the stream ended first).
    Finished {
        outcome: Outcome,
        duration: Duration,
        output: Option<ToolOutput>,
    },
}

/// One progress report, as MCP's `notifications/progress` carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub call: Call,
    pub phase: Phase,
}
