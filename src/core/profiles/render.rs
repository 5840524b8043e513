//! A profile's events for a transition, and the calls it shows: the one place that knows which
//! module renders which profile.

use super::context::Context;
use super::{hosted, openai, progress, stages, tool, tool_call};
use crate::core::lifecycle::{Kind, Transition};
use crate::core::profile::Profile;
use crate::core::sse::NewEvent;

impl Profile {
    /// Appends the events for `transition` to `out`.
    pub fn render(self, transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
        match self {
            Profile::Hosted => hosted::render(transition, context, out),
            Profile::OpenAi => openai::render(transition, context, out),
            Profile::OpenAiInline => openai::render_inline(transition, out),
            Profile::Stages => stages::render(transition, context, out),
            Profile::ToolCall => tool_call::render(transition, context, out),
            Profile::Tool => tool::render(transition, context, out),
            Profile::Progress => progress::render(transition, context, out),
        }
    }

    /// Whether this profile shows calls of `kind` at all (a running call of such a kind keeps
    /// heartbeats going).
    pub fn shows(self, kind: Kind) -> bool {
        match self {
            Profile::Hosted => hosted::hosts(kind),
            Profile::OpenAi | Profile::OpenAiInline => openai::shows(kind),
            Profile::Stages | Profile::ToolCall | Profile::Tool => kind != Kind::Ignore,
            Profile::Progress => false,
        }
    }
}
