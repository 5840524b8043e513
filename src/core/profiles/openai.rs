//! Profiles `openai` (the default) and `openai-inline`: OpenAI's hosted-tool lifecycle events,
//! as OpenAI defines them for its hosted tools.
//!
//! | kind        | running                          | finished                                   |
//! |-------------|----------------------------------|--------------------------------------------|
//! | mcp         | `mcp_call.in_progress`           | `mcp_call.completed` / `mcp_call.failed`   |
//! | web_search  | `web_search_call.in_progress`, `.searching` | `web_search_call.completed` + outcome |
//! | file_search | `file_search_call.in_progress`, `.searching` | `file_search_call.completed` + outcome |
//!
//! `openai` wraps them in a native companion item (`mcp_call`, `web_search_call`,
//! `file_search_call`, id `tp_` + call id) that is added before them and done after them, so a
//! client that checks an event's item type (openai-node's helper from 7.6) finds the type it
//! expects; the rewriter gives the companion its `output_index`. `openai-inline` points the
//! same events at the `function_call` item itself (the shape of antwort's own in-place events).
//!
//! Lifecycle events carry `item_id`, `output_index` and `name`; terminal ones add `outcome` and
//! `duration_ms`. No event has a top-level `error` key: openai-python raises `APIError` on one.
//! A call that never reached `running` had no `in_progress`, so it gets no terminal event.

use serde::Serialize;
use serde_json::Value;

use super::context::Context;
use super::item::{NO_OUTPUT, item_status, queries, server_label};
use crate::core::lifecycle::{Call, Kind, Outcome, Phase, ToolOutput, Transition};
use crate::core::sse::NewEvent;

pub use crate::core::ids::COMPANION_PREFIX;

pub fn shows(kind: Kind) -> bool {
    matches!(kind, Kind::Mcp | Kind::WebSearch | Kind::FileSearch)
}

/// The companion item's id for a call.
pub fn companion_id(call: &Call) -> String {
    format!("{COMPANION_PREFIX}{}", call.call_id)
}

/// Profile `openai`: the companion item and its events. Calls the rewriter gave no companion
/// index (past its limits) are not shown.
pub fn render(transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    let Some(index) = call.companion else { return };
    if !shows(call.kind) {
        return;
    }
    let id = companion_id(call);
    let item_event = |event_type, item| {
        NewEvent::new(event_type)
            .with("output_index", index)
            .with("item", item)
    };
    let start = out.len();
    lifecycle(transition, &id, Some(index), out);
    match &transition.phase {
        Phase::Running => {
            let item = companion_item(call, context, &id, None);
            out.insert(start, item_event("response.output_item.added", item));
        }
        Phase::Finished {
            outcome, output, ..
        } if out.len() > start => {
            let item = companion_item(call, context, &id, Some((outcome, output.as_ref())));
            out.push(item_event("response.output_item.done", item));
        }
        _ => {}
    }
}

/// Profile `openai-inline`: the events on the `function_call` item itself.
pub fn render_inline(transition: &Transition, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    lifecycle(transition, &call.item_id, call.output_index, out);
}

/// The lifecycle events of a transition, naming item `item_id` at `output_index`.
fn lifecycle(
    transition: &Transition,
    item_id: &str,
    output_index: Option<u64>,
    out: &mut Vec<NewEvent>,
) {
    let call = &transition.call;
    let base = |event_type| {
        NewEvent::new(event_type)
            .with_str("item_id", item_id)
            .maybe("output_index", output_index)
            .with_str("name", &call.name)
    };
    match (&transition.phase, call.kind) {
        (Phase::Running, Kind::Mcp) => out.push(base("response.mcp_call.in_progress")),
        (Phase::Running, Kind::WebSearch) => out.extend([
            base("response.web_search_call.in_progress"),
            base("response.web_search_call.searching"),
        ]),
        (Phase::Running, Kind::FileSearch) => out.extend([
            base("response.file_search_call.in_progress"),
            base("response.file_search_call.searching"),
        ]),
        (
            Phase::Finished {
                outcome, duration, ..
            },
            kind,
        ) if call.running_since.is_some() => {
            let event_type = match (kind, outcome) {
                (Kind::Mcp, Outcome::Completed) => "response.mcp_call.completed",
                (Kind::Mcp, Outcome::Failed(_)) => "response.mcp_call.failed",
                (Kind::WebSearch, _) => "response.web_search_call.completed",
                (Kind::FileSearch, _) => "response.file_search_call.completed",
                (Kind::Function | Kind::Ignore, _) => return,
            };
            let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            out.push(
                base(event_type)
                    .with("outcome", outcome.as_str())
                    .with("duration_ms", millis),
            );
        }
        _ => {}
    }
}

/// The companion item: in progress (`end` is `None`) or in its final state, serialized
/// straight into its event.
fn companion_item<'a>(
    call: &'a Call,
    context: &'a Context<'_>,
    id: &'a str,
    end: Option<(&Outcome, Option<&ToolOutput>)>,
) -> Companion<'a> {
    let status = item_status(end.map(|(outcome, _)| outcome));
    let args = || serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    match call.kind {
        Kind::Mcp => {
            let sanitizer = &context.settings.sanitizer;
            let text = end.and_then(|(_, output)| output).map(|o| o.text.as_str());
            let (output, error) = match end {
                Some((Outcome::Completed, _)) => {
                    (Some(sanitizer.result_text(text.unwrap_or_default())), None)
                }
                Some((Outcome::Failed(_), _)) => {
                    let text = text.map_or(NO_OUTPUT.into(), |t| sanitizer.result_text(t));
                    (None, Some(McpError::new(text)))
                }
                None => (None, None),
            };
            Companion::Mcp(McpCompanion {
                kind: "mcp_call",
                id,
                server_label: server_label(call, context),
                name: &call.name,
                arguments: sanitizer.text_as_string(&call.arguments),
                status,
                output,
                error,
            })
        }
        Kind::WebSearch => {
            let query = match args() {
                Value::Object(mut args) => args.swap_remove("query").filter(Value::is_string),
                _ => None,
            };
            Companion::WebSearch(WebSearchCompanion {
                kind: "web_search_call",
                id,
                status,
                action: SearchAction {
                    kind: "search",
                    query: query.map(|q| context.settings.sanitizer.value(q)),
                },
            })
        }
        _ => Companion::FileSearch(FileSearchCompanion {
            kind: "file_search_call",
            id,
            status,
            queries: context.settings.sanitizer.value(queries(&args())),
        }),
    }
}

/// A companion item, its fields in the order they are written.
#[derive(Serialize)]
#[serde(untagged)]
enum Companion<'a> {
    Mcp(McpCompanion<'a>),
    WebSearch(WebSearchCompanion<'a>),
    FileSearch(FileSearchCompanion<'a>),
}

#[derive(Serialize)]
struct McpCompanion<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    server_label: &'a str,
    name: &'a str,
    arguments: String,
    status: &'static str,
    /// Present once the call completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    /// Present once the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<McpError>,
}

/// `{"type":"mcp_tool_execution_error","content":[{"type":"text","text":…}]}`.
#[derive(Serialize)]
struct McpError {
    #[serde(rename = "type")]
    kind: &'static str,
    content: [TextContent; 1],
}

impl McpError {
    fn new(text: String) -> Self {
        McpError {
            kind: "mcp_tool_execution_error",
            content: [TextContent { kind: "text", text }],
        }
    }
}

#[derive(Serialize)]
struct TextContent {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

#[derive(Serialize)]
struct WebSearchCompanion<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    status: &'static str,
    action: SearchAction,
}

/// `{"type":"search"}`, with the (sanitized) `query` when the arguments hold a string one.
#[derive(Serialize)]
struct SearchAction {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    query: Option<Value>,
}

#[derive(Serialize)]
struct FileSearchCompanion<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    status: &'static str,
    queries: Value,
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::core::lifecycle::Failure;
    use crate::core::profiles::item::DEFAULT_SERVER_LABEL;

    fn call(kind: Kind, running: bool) -> Call {
        let now = Instant::now();
        Call {
            call_id: "call_1".into(),
            item_id: "fc_1".into(),
            output_index: Some(2),
            companion: Some(3),
            hosted_id: None,
            name: "tool".into(),
            kind,
            rule: None,
            arguments: r#"{"query":"rust sse","api_key":"sk-1"}"#.into(),
            arguments_truncated: false,
            added_at: now,
            running_since: running.then_some(now),
        }
    }

    fn events(kind: Kind, phase: Phase, running: bool) -> Vec<NewEvent> {
        let settings = Config::default().settings();
        let context = Context {
            settings: &settings,
            wall: None,
            hosted: false,
            nonce: 0,
        };
        let mut out = Vec::new();
        let transition = Transition {
            call: call(kind, running),
            phase,
        };
        render(&transition, &context, &mut out);
        out
    }

    fn types(kind: Kind, phase: Phase, running: bool) -> Vec<&'static str> {
        events(kind, phase, running)
            .iter()
            .map(|e| e.event_type)
            .collect()
    }

    fn finished(outcome: Outcome, output: Option<&str>) -> Phase {
        Phase::Finished {
            outcome,
            duration: Duration::from_millis(1500),
            output: output.map(|text| ToolOutput {
                text: text.into(),
                error: None,
            }),
        }
    }

    fn field(event: &NewEvent, key: &str) -> Value {
        event.field(key).expect(key)
    }

    #[test]
    fn table_of_events() {
        let failed = || Outcome::Failed(Failure::NoOutput);
        let added = "response.output_item.added";
        let done = "response.output_item.done";
        assert_eq!(
            types(Kind::Mcp, Phase::Running, true),
            [added, "response.mcp_call.in_progress"]
        );
        assert_eq!(
            types(Kind::WebSearch, Phase::Running, true),
            [
                added,
                "response.web_search_call.in_progress",
                "response.web_search_call.searching"
            ]
        );
        assert_eq!(
            types(Kind::FileSearch, Phase::Running, true),
            [
                added,
                "response.file_search_call.in_progress",
                "response.file_search_call.searching"
            ]
        );
        assert_eq!(
            types(Kind::Mcp, finished(failed(), None), true),
            ["response.mcp_call.failed", done]
        );
        assert_eq!(
            types(Kind::WebSearch, finished(failed(), None), true),
            ["response.web_search_call.completed", done]
        );
        assert!(types(Kind::Function, Phase::Running, true).is_empty());
        assert!(types(Kind::Mcp, Phase::Started, false).is_empty());
        assert!(
            types(Kind::Mcp, finished(Outcome::Completed, None), false).is_empty(),
            "no terminal without in_progress"
        );
    }

    #[test]
    fn companion_items_in_each_state() {
        let running = events(Kind::Mcp, Phase::Running, true);
        let item = field(&running[0], "item");
        assert_eq!(field(&running[0], "output_index"), 3);
        assert_eq!(item["id"], "tp_call_1");
        assert_eq!(item["server_label"], DEFAULT_SERVER_LABEL);
        assert_eq!(item["status"], "in_progress");
        let args: Value = serde_json::from_str(item["arguments"].as_str().expect("string"))
            .expect("arguments stay JSON");
        assert_eq!(args["api_key"], "[REDACTED]");
        assert_eq!(field(&running[1], "item_id"), "tp_call_1");
        assert_eq!(field(&running[1], "output_index"), 3);

        let ok = events(Kind::Mcp, finished(Outcome::Completed, Some("42")), true);
        assert_eq!(field(&ok[1], "item")["output"], "42");
        assert_eq!(field(&ok[1], "item")["status"], "completed");
        let failed = Outcome::Failed(Failure::Pattern(0));
        let bad = events(Kind::Mcp, finished(failed, Some("boom")), true);
        let item = field(&bad[1], "item");
        assert_eq!(item["status"], "failed");
        assert_eq!(item["error"]["type"], "mcp_tool_execution_error");
        assert_eq!(item["error"]["content"][0]["text"], "boom");
        let lost = events(
            Kind::Mcp,
            finished(Outcome::Failed(Failure::NoOutput), None),
            true,
        );
        assert_eq!(
            field(&lost[1], "item")["error"]["content"][0]["text"],
            NO_OUTPUT
        );

        let web = events(Kind::WebSearch, Phase::Running, true);
        assert_eq!(field(&web[0], "item")["action"]["query"], "rust sse");
        let file = events(Kind::FileSearch, Phase::Running, true);
        assert_eq!(field(&file[0], "item")["queries"], json!(["rust sse"]));
    }

    #[test]
    fn inline_events_name_the_call_item() {
        let mut out = Vec::new();
        let t = Transition {
            call: call(Kind::FileSearch, true),
            phase: finished(Outcome::Failed(Failure::Error), None),
        };
        render_inline(&t, &mut out);
        assert_eq!(
            out[0].keys(),
            ["item_id", "output_index", "name", "outcome", "duration_ms"]
        );
        assert_eq!(field(&out[0], "item_id"), "fc_1");
        assert_eq!(field(&out[0], "output_index"), 2);
        assert_eq!(field(&out[0], "outcome"), "failed");
        assert_eq!(field(&out[0], "duration_ms"), 1500);
    }
}
