//! Profile `hosted` (the default): a call the gateway runs is shown as OpenAI shows its own
//! server-side tools, one native item (`mcp_call`, `web_search_call`, `file_search_call`) in
//! place of the gateway's `function_call` and `function_call_output` items, with OpenAI's event
//! sequence (docs/hosted.md). The rewriter hides the two upstream items and gives the hosted
//! item the call's `output_index` (`Call::companion`); this module renders its events:
//!
//! | phase          | mcp                                   | web_search / file_search                |
//! |----------------|---------------------------------------|-----------------------------------------|
//! | started        | `output_item.added`, `mcp_call.in_progress` | `output_item.added`, `…_call.in_progress` |
//! | arguments delta| `mcp_call_arguments.delta`            | nothing                                 |
//! | running        | `mcp_call_arguments.done`             | `…_call.searching`                      |
//! | finished       | `mcp_call.completed`/`.failed`, `output_item.done` | `…_call.completed`, `output_item.done` |
//!
//! The item carries the gateway's content verbatim (arguments, output): it is the transcript
//! now, read again by the model on the next turn.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::context::Context;
use super::item::{NO_OUTPUT, item_status, queries, server_label};
use crate::core::lifecycle::{Call, Kind, Outcome, Phase, ToolOutput, Transition};
use crate::core::sse::NewEvent;

/// Whether calls of `kind` get a hosted item.
pub fn hosts(kind: Kind) -> bool {
    matches!(kind, Kind::Mcp | Kind::WebSearch | Kind::FileSearch)
}

/// The hosted item's id for `call`: the one the rewriter gave it, else made now.
pub fn item_id<'a>(call: &'a Call, context: &Context<'_>) -> Cow<'a, str> {
    match &call.hosted_id {
        Some(id) => Cow::Borrowed(id),
        None => Cow::Owned(context.settings.key.id_for(&call.call_id, context.nonce)),
    }
}

/// The events of `transition` for a call shown as a hosted item (others: nothing).
pub fn render(transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    let Some(index) = call.companion else { return };
    if !hosts(call.kind) {
        return;
    }
    let id = item_id(call, context);
    let base = |event_type| {
        NewEvent::new(event_type)
            .with_str("item_id", &id)
            .with("output_index", index)
            .with_str("name", &call.name)
    };
    let item_event = |event_type, item| {
        NewEvent::new(event_type)
            .with("output_index", index)
            .with("item", item)
    };
    let (in_progress, next, done) = match call.kind {
        Kind::Mcp => (
            "response.mcp_call.in_progress",
            "response.mcp_call_arguments.done",
            "response.mcp_call.completed",
        ),
        Kind::WebSearch => (
            "response.web_search_call.in_progress",
            "response.web_search_call.searching",
            "response.web_search_call.completed",
        ),
        _ => (
            "response.file_search_call.in_progress",
            "response.file_search_call.searching",
            "response.file_search_call.completed",
        ),
    };
    match &transition.phase {
        Phase::Started => {
            let item = item(call, context, &id, None);
            out.push(item_event("response.output_item.added", item));
            out.push(base(in_progress));
        }
        Phase::ArgumentsDelta { chunk } if call.kind == Kind::Mcp => {
            out.push(base("response.mcp_call_arguments.delta").with("delta", chunk.as_str()));
        }
        Phase::Running if call.kind == Kind::Mcp => {
            out.push(base(next).with("arguments", call.arguments.as_str()));
        }
        Phase::Running => out.push(base(next)),
        Phase::Finished {
            outcome,
            duration,
            output,
        } => {
            let event_type = match (call.kind, outcome) {
                (Kind::Mcp, Outcome::Failed(_)) => "response.mcp_call.failed",
                _ => done,
            };
            let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            out.push(
                base(event_type)
                    .with("outcome", outcome.as_str())
                    .with("duration_ms", millis),
            );
            let end = Some((outcome, output.as_ref()));
            out.push(item_event(
                "response.output_item.done",
                item(call, context, &id, end),
            ));
        }
        _ => {}
    }
}

/// The hosted item: in progress (`end` is `None`) or in its final state. It borrows from the
/// call and serializes straight into an event's JSON (`serde_json::to_value` for a `Value`).
pub fn item<'a>(
    call: &'a Call,
    context: &'a Context<'_>,
    id: &'a str,
    end: Option<(&Outcome, Option<&'a ToolOutput>)>,
) -> Item<'a> {
    let status = item_status(end.map(|(outcome, _)| outcome));
    let args = || match end {
        Some(_) => serde_json::from_str(&call.arguments).unwrap_or(Value::Null),
        None => Value::Null,
    };
    match call.kind {
        Kind::Mcp => {
            let text = end.and_then(|(_, output)| output).map(|o| o.text.as_str());
            let (output, error) = match end {
                None => (None, None),
                Some((Outcome::Completed, _)) => (Some(text.unwrap_or_default()), None),
                Some((Outcome::Failed(_), _)) => {
                    let text = text.unwrap_or(NO_OUTPUT);
                    (None, Some(McpError::new(text)))
                }
            };
            Item::Mcp(McpItem {
                id,
                kind: "mcp_call",
                status,
                server_label: server_label(call, context),
                name: &call.name,
                arguments: if end.is_some() { &call.arguments } else { "" },
                output,
                error,
            })
        }
        Kind::WebSearch => {
            // openai-python requires `action` from the start; the query is known at the end.
            let query = match args() {
                Value::Object(mut args) => args.swap_remove("query").filter(Value::is_string),
                _ => None,
            };
            Item::WebSearch(WebSearchItem {
                id,
                kind: "web_search_call",
                status,
                action: SearchAction {
                    kind: "search",
                    query,
                },
            })
        }
        _ => Item::FileSearch(FileSearchItem {
            id,
            kind: "file_search_call",
            status,
            queries: queries(&args()),
            results: (),
        }),
    }
}

/// A hosted item, as [`item`] makes it: its fields in the order they are written.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Item<'a> {
    Mcp(McpItem<'a>),
    WebSearch(WebSearchItem<'a>),
    FileSearch(FileSearchItem<'a>),
}

#[derive(Debug, Serialize)]
pub struct McpItem<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    status: &'static str,
    server_label: &'a str,
    name: &'a str,
    arguments: &'a str,
    /// `null` until the call completed.
    output: Option<&'a str>,
    /// `null` unless the call failed.
    error: Option<McpError<'a>>,
}

/// `{"type":"mcp_tool_execution_error","content":[{"type":"text","text":…}]}`.
#[derive(Debug, Serialize)]
pub struct McpError<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    content: [TextContent<'a>; 1],
}

impl<'a> McpError<'a> {
    fn new(text: &'a str) -> Self {
        McpError {
            kind: "mcp_tool_execution_error",
            content: [TextContent { kind: "text", text }],
        }
    }
}

#[derive(Debug, Serialize)]
pub struct TextContent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Debug, Serialize)]
pub struct WebSearchItem<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    status: &'static str,
    action: SearchAction,
}

/// `{"type":"search"}`, with the `query` once the arguments hold a string one.
#[derive(Debug, Serialize)]
pub struct SearchAction {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    query: Option<Value>,
}

#[derive(Debug, Serialize)]
pub struct FileSearchItem<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    status: &'static str,
    queries: Value,
    /// Always `null`.
    results: (),
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::core::lifecycle::Failure;

    fn call(kind: Kind) -> Call {
        let now = Instant::now();
        Call {
            call_id: "call_1".into(),
            item_id: "fc_1".into(),
            output_index: Some(2),
            companion: Some(2),
            hosted_id: None,
            name: "tool".into(),
            kind,
            rule: None,
            arguments: r#"{"query":"rust sse","api_key":"sk-1"}"#.into(),
            arguments_truncated: false,
            added_at: now,
            running_since: Some(now),
        }
    }

    fn render_phase(kind: Kind, phase: Phase) -> Vec<NewEvent> {
        let settings = Config::default().settings();
        let context = Context {
            settings: &settings,
            wall: None,
            hosted: true,
            nonce: 0,
        };
        let mut out = Vec::new();
        let transition = Transition {
            call: call(kind),
            phase,
        };
        render(&transition, &context, &mut out);
        out
    }

    fn field(event: &NewEvent, key: &str) -> Value {
        event.field(key).expect(key)
    }

    fn finished(outcome: Outcome, output: Option<&str>) -> Phase {
        Phase::Finished {
            outcome,
            duration: Duration::from_millis(20),
            output: output.map(|t| ToolOutput {
                text: t.into(),
                error: None,
            }),
        }
    }

    #[test]
    fn an_mcp_call_in_each_phase() {
        let started = render_phase(Kind::Mcp, Phase::Started);
        let types: Vec<_> = started.iter().map(|e| e.event_type).collect();
        assert_eq!(
            types,
            [
                "response.output_item.added",
                "response.mcp_call.in_progress"
            ]
        );
        let item = field(&started[0], "item");
        assert!(item["id"].as_str().expect("id").starts_with("tph_"));
        assert_eq!(item["arguments"], "", "no arguments yet");
        assert_eq!(item["status"], "in_progress");
        assert_eq!(field(&started[1], "item_id"), item["id"]);
        assert_eq!(field(&started[1], "output_index"), 2);

        let delta = render_phase(
            Kind::Mcp,
            Phase::ArgumentsDelta {
                chunk: "{\"q".into(),
            },
        );
        assert_eq!(delta[0].event_type, "response.mcp_call_arguments.delta");
        assert_eq!(field(&delta[0], "delta"), "{\"q");
        let running = render_phase(Kind::Mcp, Phase::Running);
        assert_eq!(
            field(&running[0], "arguments"),
            r#"{"query":"rust sse","api_key":"sk-1"}"#,
            "verbatim: the item is the transcript"
        );

        let ok = render_phase(Kind::Mcp, finished(Outcome::Completed, Some("42\n")));
        assert_eq!(ok[0].event_type, "response.mcp_call.completed");
        let item = field(&ok[1], "item");
        assert_eq!(item["output"], "42\n");
        assert_eq!(item["status"], "completed");
        assert_eq!(item["error"], Value::Null);

        let bad = render_phase(
            Kind::Mcp,
            finished(Outcome::Failed(Failure::Pattern(0)), Some("boom")),
        );
        assert_eq!(bad[0].event_type, "response.mcp_call.failed");
        let item = field(&bad[1], "item");
        assert_eq!(item["status"], "failed");
        assert_eq!(item["output"], Value::Null);
        assert_eq!(item["error"]["content"][0]["text"], "boom");
        let lost = render_phase(
            Kind::Mcp,
            finished(Outcome::Failed(Failure::NoOutput), None),
        );
        assert_eq!(
            field(&lost[1], "item")["error"]["content"][0]["text"],
            NO_OUTPUT
        );
    }

    #[test]
    fn searches_in_each_phase() {
        let web = render_phase(Kind::WebSearch, Phase::Started);
        assert_eq!(web[1].event_type, "response.web_search_call.in_progress");
        assert_eq!(
            render_phase(Kind::WebSearch, Phase::Running)[0].event_type,
            "response.web_search_call.searching"
        );
        assert!(
            render_phase(Kind::WebSearch, Phase::ArgumentsDelta { chunk: "x".into() }).is_empty()
        );
        let failed = Outcome::Failed(Failure::Pattern(0));
        let done = render_phase(Kind::WebSearch, finished(failed, Some("search failed")));
        assert_eq!(done[0].event_type, "response.web_search_call.completed");
        let item = field(&done[1], "item");
        assert_eq!(item["status"], "failed");
        assert_eq!(
            item["action"],
            json!({"type": "search", "query": "rust sse"})
        );

        let file = render_phase(Kind::FileSearch, finished(Outcome::Completed, Some("[]")));
        let item = field(&file[1], "item");
        assert_eq!(item["queries"], json!(["rust sse"]));
        assert_eq!(item["results"], Value::Null);
        assert!(render_phase(Kind::Function, Phase::Started).is_empty());
    }
}
