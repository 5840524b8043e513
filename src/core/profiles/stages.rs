//! Profile `stages` (the ToolBlock stage model): one `tool.stage` event per step,
//! `start` (the call item appeared) → `streaming` (each arguments delta, with `parametersChunk`
//! and the accumulated `parameters`) → `running` (arguments complete, then at every heartbeat
//! with `elapsed_ms`, and at every progress report with `progress`, `total`, `message`) → `end` (`success` with `result`, or `error`). Exactly one `start` and one
//! `end` per call, also for calls the stream's end closes; generic functions too.
//!
//! `parameters` is the arguments' JSON text with secret-looking keys redacted — while streaming
//! by an incremental redactor, so a secret never goes out even in pieces. Streaming events stop
//! once the arguments outgrow `max_payload_bytes` (`running` and `end` still carry them, capped).

use std::time::Duration;

use serde_json::Value;

use super::context::Context;
use super::text;
use crate::core::lifecycle::{Outcome, Phase, Transition};
use crate::core::sse::NewEvent;

pub fn render(transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    let sanitizer = &context.settings.sanitizer;
    let block = |stage: &'static str, parameters: String| {
        NewEvent::data_only("tool.stage")
            .with("stage", stage)
            .with("id", call.call_id.as_str())
            .with("name", call.name.as_str())
            .with("parameters", parameters)
    };
    let elapsed = |d: &Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    match &transition.phase {
        Phase::Started => out.push(block("start", String::new())),
        Phase::ArgumentsDelta { chunk } => {
            // Past `max_payload_bytes` the tracker does not carry the arguments (`Deltas`).
            if call.arguments_truncated || call.arguments.len() > sanitizer.max_payload_bytes() {
                return;
            }
            let before = &call.arguments[..call.arguments.len() - chunk.len()];
            let mut redactor = sanitizer.streaming();
            let mut parameters = redactor.push(before);
            let piece = redactor.push(chunk);
            parameters.push_str(&piece);
            out.push(block("streaming", parameters).with("parametersChunk", piece));
        }
        Phase::Running => {
            let parameters = sanitizer.text_as_string(&call.arguments);
            out.push(block("running", parameters).with("elapsed_ms", 0));
        }
        Phase::StillRunning { elapsed: e } => {
            let parameters = sanitizer.text_as_string(&call.arguments);
            out.push(block("running", parameters).with("elapsed_ms", elapsed(e)));
        }
        Phase::Progress { elapsed: e, report } => {
            let parameters = sanitizer.text_as_string(&call.arguments);
            let running = block("running", parameters).with("elapsed_ms", elapsed(e));
            out.push(text::with_progress(running, report));
        }
        Phase::Finished {
            outcome, output, ..
        } => {
            let end = block("end", sanitizer.text_as_string(&call.arguments));
            out.push(match outcome {
                Outcome::Completed => {
                    let result = output.as_ref().map(|o| sanitizer.text_as_string(&o.text));
                    end.with("success", true)
                        .maybe("result", result.map(Value::from))
                }
                Outcome::Failed(failure) => {
                    let error = text::failure_message(context, failure, output.as_ref());
                    end.with("success", false).with("error", error)
                }
            });
        }
    }
}
