//! A checker of an AG-UI run's output (toolpulse's AG-UI endpoint), from its bytes alone:
//!
//! - every event is one `data:` line (or a comment: a heartbeat) of a JSON object with a string `type`; no Responses
//!   dialect leaks (no `sequence_number`, no hosted `tph_` id, no `response.*` type);
//! - `RUN_STARTED` first; `RUN_FINISHED` or `RUN_ERROR` last, exactly one of them, nothing after;
//! - every `TOOL_CALL_START` has exactly one `TOOL_CALL_END` after it, its `TOOL_CALL_ARGS` in
//!   between; a `TOOL_CALL_RESULT` follows its call's END, at most one per call;
//! - text and reasoning messages start once, get content only while open, end once, and are
//!   closed before `RUN_FINISHED`;
//! - each activity has one `ACTIVITY_SNAPSHOT` before its deltas, and exactly one event sets
//!   its final `status` (`completed` or `failed`), with nothing after it; a call whose result
//!   came ends its activity `completed` or `failed` after the result, and a call of a running
//!   activity with no result ends `failed`.

use std::collections::HashMap;

use serde_json::{Map, Value};
use toolpulse::core::sse::{Item, Parser};

/// What the checker counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub events: usize,
    pub tool_calls: usize,
    pub results: usize,
    pub activities: usize,
    /// Final activity statuses, `failed` ones.
    pub failed: usize,
    pub text_messages: usize,
    /// `RUN_FINISHED` (else the run ended with `RUN_ERROR`).
    pub finished: bool,
}

#[derive(Default)]
struct Call {
    ended: bool,
    result: bool,
}

#[derive(Default)]
struct Activity {
    final_status: Option<String>,
    tool_call: Option<String>,
}

/// The events of `output`, as JSON objects (comments, the heartbeats, skipped).
pub fn events(output: &[u8]) -> Result<Vec<Map<String, Value>>, String> {
    let mut parser = Parser::new(usize::MAX);
    parser.push(output);
    parser.finish();
    let mut events = Vec::new();
    while let Some(item) = parser.next_item() {
        let Item::Event(event) = item else {
            return Err("an unterminated or oversize event".into());
        };
        if event.data().is_none() && event.has_comment() {
            continue;
        }
        if event.event_type().is_some() || event.id().is_some() {
            return Err(format!(
                "event {}: only data lines are AG-UI's",
                events.len()
            ));
        }
        let data = event
            .data()
            .ok_or_else(|| format!("event {}: no data", events.len()))?;
        match serde_json::from_slice(&data) {
            Ok(Value::Object(json)) if json.get("type").is_some_and(Value::is_string) => {
                events.push(json)
            }
            _ => return Err(format!("event {}: not an event object", events.len())),
        }
    }
    Ok(events)
}

fn text<'a>(event: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    event
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no string {key}"))
}

/// Checks an AG-UI run's output.
pub fn check(output: &[u8]) -> Result<Report, String> {
    let events = events(output)?;
    let mut report = Report {
        events: events.len(),
        ..Report::default()
    };
    let mut calls: HashMap<String, Call> = HashMap::new();
    let mut activities: HashMap<String, Activity> = HashMap::new();
    let mut texts: HashMap<String, bool> = HashMap::new();
    let mut reasoning: HashMap<String, bool> = HashMap::new();
    let mut ended = false;
    for (k, event) in events.iter().enumerate() {
        let at = |e: String| format!("event {k} ({}): {e}", event["type"]);
        let raw = Value::Object(event.clone()).to_string();
        if event.contains_key("sequence_number") || raw.contains("tph_") {
            return Err(at("the Responses dialect leaks".into()));
        }
        if ended {
            return Err(at("after the run ended".into()));
        }
        let kind = text(event, "type").map_err(at)?;
        if (k == 0) != (kind == "RUN_STARTED") {
            return Err(at("RUN_STARTED must be first, and only first".into()));
        }
        match kind {
            "RUN_STARTED" => {
                text(event, "threadId").map_err(at)?;
                text(event, "runId").map_err(at)?;
            }
            "RUN_FINISHED" | "RUN_ERROR" => {
                ended = true;
                report.finished = kind == "RUN_FINISHED";
                if report.finished {
                    let open = calls.iter().filter(|(_, c)| !c.ended).map(|(id, _)| id);
                    if let Some(id) = open.into_iter().next() {
                        return Err(at(format!("tool call {id} is not ended")));
                    }
                    let open = texts.iter().chain(&reasoning).find(|(_, open)| **open);
                    if let Some((id, _)) = open {
                        return Err(at(format!("message {id} is not ended")));
                    }
                } else {
                    text(event, "message").map_err(at)?;
                }
            }
            "TOOL_CALL_START" => {
                let id = text(event, "toolCallId").map_err(at)?;
                text(event, "toolCallName").map_err(at)?;
                if calls.insert(id.to_string(), Call::default()).is_some() {
                    return Err(at(format!("tool call {id} started twice")));
                }
                report.tool_calls += 1;
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let id = text(event, "toolCallId").map_err(at)?;
                let call = calls
                    .get_mut(id)
                    .ok_or_else(|| at(format!("{id} not started")))?;
                if call.ended {
                    return Err(at(format!("tool call {id} already ended")));
                }
                call.ended = kind == "TOOL_CALL_END";
            }
            "TOOL_CALL_RESULT" => {
                let id = text(event, "toolCallId").map_err(at)?;
                text(event, "messageId").map_err(at)?;
                text(event, "content").map_err(at)?;
                let call = calls
                    .get_mut(id)
                    .ok_or_else(|| at(format!("{id} not started")))?;
                if !call.ended || call.result {
                    return Err(at(format!("a result of {id} before its end, or twice")));
                }
                call.result = true;
                report.results += 1;
            }
            "TEXT_MESSAGE_START" | "REASONING_MESSAGE_START" => {
                let id = text(event, "messageId").map_err(at)?;
                let open = if kind == "TEXT_MESSAGE_START" {
                    &mut texts
                } else {
                    &mut reasoning
                };
                if open.insert(id.to_string(), true).is_some() {
                    return Err(at(format!("message {id} started twice")));
                }
                report.text_messages += usize::from(kind == "TEXT_MESSAGE_START");
            }
            "TEXT_MESSAGE_CONTENT"
            | "TEXT_MESSAGE_END"
            | "REASONING_MESSAGE_CONTENT"
            | "REASONING_MESSAGE_END" => {
                let id = text(event, "messageId").map_err(at)?;
                let open = if kind.starts_with("TEXT") {
                    &mut texts
                } else {
                    &mut reasoning
                };
                if open.get(id) != Some(&true) {
                    return Err(at(format!("message {id} is not open")));
                }
                if kind.ends_with("_END") {
                    open.insert(id.to_string(), false);
                } else {
                    text(event, "delta").map_err(at)?;
                }
            }
            "ACTIVITY_SNAPSHOT" => {
                let id = text(event, "messageId").map_err(at)?;
                let content = event.get("content").and_then(Value::as_object);
                let content = content.ok_or_else(|| at("no content object".into()))?;
                if activities.contains_key(id) {
                    return Err(at(format!("activity {id} snapshot twice")));
                }
                if content.get("status").and_then(Value::as_str) != Some("running") {
                    return Err(at("an activity starts running".into()));
                }
                let tool_call = content.get("toolCallId").and_then(Value::as_str);
                let activity = Activity {
                    final_status: None,
                    tool_call: tool_call.map(str::to_string),
                };
                activities.insert(id.to_string(), activity);
                report.activities += 1;
            }
            "ACTIVITY_DELTA" => {
                let id = text(event, "messageId").map_err(at)?;
                let activity = activities.get_mut(id);
                let activity =
                    activity.ok_or_else(|| at(format!("activity {id} has no snapshot")))?;
                if activity.final_status.is_some() {
                    return Err(at(format!("activity {id} changed after its final status")));
                }
                let patch = event.get("patch").and_then(Value::as_array);
                for op in patch.ok_or_else(|| at("no patch list".into()))? {
                    if op.get("path").and_then(Value::as_str) != Some("/status") {
                        continue;
                    }
                    let status = op.get("value").and_then(Value::as_str).unwrap_or_default();
                    if status != "completed" && status != "failed" {
                        return Err(at(format!("a final status of {status:?}")));
                    }
                    report.failed += usize::from(status == "failed");
                    activity.final_status = Some(status.to_string());
                }
            }
            "REASONING_START" | "REASONING_END" => {
                text(event, "messageId").map_err(at)?;
            }
            other if other.contains('.') || other.starts_with("response") => {
                return Err(at("a Responses event".into()));
            }
            _ => {}
        }
    }
    if !ended {
        return Err("the run never ended".into());
    }
    for (id, activity) in &activities {
        let Some(status) = &activity.final_status else {
            return Err(format!("activity {id} has no final status"));
        };
        let call = activity.tool_call.as_ref().and_then(|c| calls.get(c));
        if let Some(call) = call
            && !call.result
            && status != "failed"
        {
            return Err(format!("activity {id}: a call without result ends failed"));
        }
    }
    Ok(report)
}
