//! Event profiles: each renders lifecycle [`Transition`]s as the SSE events one kind of client
//! expects. A profile is a small pure function; the rewriter numbers and encodes what it returns.

pub mod openai;

use crate::lifecycle::{Kind, Transition};
use crate::sse::NewEvent;

/// A client contract for tool lifecycle events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// OpenAI's own hosted-tool events (`response.web_search_call.in_progress`, …). The default.
    OpenAi,
}

impl Profile {
    /// Appends the events for `transition` to `out`.
    pub fn render(self, transition: &Transition, out: &mut Vec<NewEvent>) {
        match self {
            Profile::OpenAi => openai::render(transition, out),
        }
    }

    /// Whether this profile shows calls of `kind` at all (a running call of such a kind keeps
    /// heartbeats going).
    pub fn shows(self, kind: Kind) -> bool {
        match self {
            Profile::OpenAi => openai::shows(kind),
        }
    }
}
