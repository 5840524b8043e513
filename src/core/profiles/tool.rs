//! Profile `tool` (the "tool lifecycle events" contract): `tool_start {tool_call_id, tool_name, display?, args, ts}` when the
//! tool starts running, `tool_progress {tool_call_id, tool_name, display?, progress, total?,
//! message?, ts}` at each progress report (the progress event), then `tool_end {…, status:"success", duration_ms, result, ts}` or
//! `tool_error {…, status:"error", duration_ms, error:{message, kind}, ts}`. `display` comes
//! from the tool's template (left out when a placeholder has no value); `error.kind` from the
//! failure rule that matched; `ts` is RFC 3339 UTC with milliseconds. Payloads are sanitized.

use super::context::Context;
use super::text;
use super::tool_call::millis;
use crate::core::lifecycle::{Outcome, Phase, Transition};
use crate::core::sse::NewEvent;

pub fn render(transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    // Only the start and the end are shown (the end only for a call that started): skip the
    // sanitizing and formatting below for every argument delta and heartbeat.
    let shown = match transition.phase {
        Phase::Running | Phase::Progress { .. } => true,
        Phase::Finished { .. } => call.running_since.is_some(),
        _ => false,
    };
    if !shown {
        return;
    }
    let args = text::arguments(context, call);
    let head = |event_type| {
        NewEvent::data_only(event_type)
            .with("tool_call_id", call.call_id.as_str())
            .with("tool_name", call.name.as_str())
            .maybe("display", text::display(context, call, &args))
    };
    let ts = text::timestamp(context.wall);
    match &transition.phase {
        Phase::Running => out.push(
            head("tool_start")
                .with("args", args.clone())
                .maybe("ts", ts),
        ),
        Phase::Progress { report, .. } => {
            let progress = text::with_progress(head("tool_progress"), report);
            out.push(progress.maybe("ts", ts));
        }
        // A call that never ran had no start, so it gets no end either.
        Phase::Finished {
            outcome,
            duration,
            output,
        } if call.running_since.is_some() => {
            let output = output.as_ref();
            out.push(match outcome {
                Outcome::Completed => {
                    let text = output.map_or("", |o| o.text.as_str());
                    head("tool_end")
                        .with("status", "success")
                        .with("duration_ms", millis(duration))
                        .with("result", context.settings.sanitizer.text(text))
                        .maybe("ts", ts)
                }
                Outcome::Failed(failure) => {
                    let error = serde_json::json!({
                        "message": text::failure_message(context, failure, output),
                        "kind": context.settings.failure.kind_of(failure),
                    });
                    head("tool_error")
                        .with("status", "error")
                        .with("duration_ms", millis(duration))
                        .with("error", error)
                        .maybe("ts", ts)
                }
            });
        }
        _ => {}
    }
}
