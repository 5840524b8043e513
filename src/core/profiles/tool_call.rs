//! Profile `tool_call` (the "tool invocation events" contract): `tool_call_start {toolCallId, toolName, input}` when the tool
//! starts running, `tool_call_progress {toolCallId, progress, total?, message?}` at each progress
//! report, then `tool_call_end {toolCallId, summary, resultCount, durationMs, output?}`
//! (`output` left out when empty, `resultCount` when unknown) or
//! `tool_call_error {toolCallId, error, retryable, wasRetried}`. Payloads are sanitized.

use serde_json::Value;

use super::context::Context;
use super::text;
use crate::core::lifecycle::{Outcome, Phase, Transition};
use crate::core::sse::NewEvent;

pub fn render(transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    let id = call.call_id.as_str();
    match &transition.phase {
        Phase::Running => out.push(
            NewEvent::data_only("tool_call_start")
                .with("toolCallId", id)
                .with("toolName", call.name.as_str())
                .with("input", text::arguments(context, call)),
        ),
        Phase::Progress { report, .. } => out.push(text::with_progress(
            NewEvent::data_only("tool_call_progress").with("toolCallId", id),
            report,
        )),
        // A call that never ran had no start, so it gets no end either.
        Phase::Finished {
            outcome,
            duration,
            output,
        } if call.running_since.is_some() => {
            let output = output.as_ref();
            let json = text::output_json(output);
            out.push(match outcome {
                Outcome::Completed => {
                    let args = text::arguments(context, call);
                    let count = text::result_count(context, call, &json);
                    let sent = text::has_content(output)
                        .then(|| output.map(|o| context.settings.sanitizer.text(&o.text)))
                        .flatten();
                    NewEvent::data_only("tool_call_end")
                        .with("toolCallId", id)
                        .with("summary", text::summary(context, call, &args, count))
                        .maybe("resultCount", count)
                        .with("durationMs", millis(duration))
                        .maybe("output", sent)
                }
                Outcome::Failed(failure) => {
                    let (retryable, was_retried) = text::retry_flags(&json);
                    NewEvent::data_only("tool_call_error")
                        .with("toolCallId", id)
                        .with("error", text::failure_message(context, failure, output))
                        .with("retryable", retryable)
                        .with("wasRetried", was_retried)
                }
            });
        }
        _ => {}
    }
}

pub(super) fn millis(duration: &std::time::Duration) -> Value {
    Value::from(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}
