//! Profile `progress` (with `hosted` or `openai`): `response.<kind>_call.progress` events for
//! out-of-band progress, on the item that shows the call.

use super::context::Context;
use super::{hosted, openai, text};
use crate::core::lifecycle::{Kind, Phase, Transition};
use crate::core::sse::NewEvent;

/// Profile `progress` (with `openai`): `response.<kind>_call.progress` on the call's companion
/// at each progress report. OpenAI defines no such event, and openai-node's stream helper
/// throws on unknown types, so this is opt-in.
pub fn render(transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    let (Phase::Progress { report, .. }, Some(index)) = (&transition.phase, call.companion) else {
        return;
    };
    let event_type = match call.kind {
        Kind::Mcp => "response.mcp_call.progress",
        Kind::WebSearch => "response.web_search_call.progress",
        Kind::FileSearch => "response.file_search_call.progress",
        Kind::Function | Kind::Ignore => return,
    };
    let item_id = match context.hosted {
        true => hosted::item_id(call, context),
        false => openai::companion_id(call).into(),
    };
    let event = NewEvent::new(event_type)
        .with("item_id", item_id)
        .with("output_index", index)
        .with("name", call.name.as_str());
    out.push(text::with_progress(event, report));
}
