//! What a Responses event means for an AG-UI run besides its tool calls (those are the
//! dialect's [`crate::core::dialect::responses::read`]): text and reasoning, and how the
//! response ended. Only top-level members and the item's head are read.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// One event's meaning for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Meaning<'a> {
    /// An item was added: a `message`, a `reasoning` item, or another type.
    ItemAdded {
        kind: Cow<'a, str>,
        id: Option<Cow<'a, str>>,
    },
    /// An item is done; `text` is a message's text (its `output_text` parts joined).
    ItemDone {
        kind: Cow<'a, str>,
        id: Option<Cow<'a, str>>,
        text: String,
    },
    TextDelta {
        item_id: Option<Cow<'a, str>>,
        delta: Cow<'a, str>,
    },
    /// A delta of a reasoning summary (`summary_index`) or of the reasoning text itself.
    ReasoningDelta {
        item_id: Option<Cow<'a, str>>,
        part: u64,
        delta: Cow<'a, str>,
    },
    ReasoningPartDone {
        item_id: Option<Cow<'a, str>>,
        part: u64,
    },
    Completed,
    /// `response.failed`, `response.incomplete` or an `error` event: the gateway's message.
    Failed {
        message: String,
        code: Option<String>,
    },
    Other,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    item_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    item: Option<&'a RawValue>,
    #[serde(borrow, default)]
    response: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    code: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    content_index: Option<u64>,
}

#[derive(Deserialize)]
struct ItemHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    content: Option<Vec<Part>>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize, Default)]
struct Problem {
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
}

#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

/// The data is not an event object: it means nothing for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

/// The event type of `data` and what it means; `Err` when the data is not a JSON object with a
/// string `type`.
pub fn read(data: &[u8]) -> Result<(Cow<'_, str>, Meaning<'_>), Unreadable> {
    let envelope: Envelope<'_> = serde_json::from_slice(data).map_err(|_| Unreadable)?;
    let meaning = meaning(&envelope);
    Ok((envelope.kind, meaning))
}

fn meaning<'a>(e: &Envelope<'a>) -> Meaning<'a> {
    let item_id = || e.item_id.and_then(string);
    match &*e.kind {
        "response.output_item.added" | "response.output_item.done" => {
            let Some(head) = e.item.and_then(parse::<ItemHead<'a>>) else {
                return Meaning::Other;
            };
            if e.kind.ends_with("added") {
                return Meaning::ItemAdded {
                    kind: head.kind,
                    id: head.id,
                };
            }
            let parts = head.content.unwrap_or_default().into_iter();
            let texts = parts
                .filter(|p| p.kind == "output_text")
                .filter_map(|p| p.text);
            let text = texts.collect::<Vec<_>>().concat();
            Meaning::ItemDone {
                kind: head.kind,
                id: head.id,
                text,
            }
        }
        "response.output_text.delta" => match e.delta.and_then(string) {
            Some(delta) => Meaning::TextDelta {
                item_id: item_id(),
                delta,
            },
            None => Meaning::Other,
        },
        "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
            let part = e.summary_index.or(e.content_index).unwrap_or(0);
            match e.delta.and_then(string) {
                Some(delta) => Meaning::ReasoningDelta {
                    item_id: item_id(),
                    part,
                    delta,
                },
                None => Meaning::Other,
            }
        }
        "response.reasoning_summary_text.done" | "response.reasoning_text.done" => {
            let part = e.summary_index.or(e.content_index).unwrap_or(0);
            Meaning::ReasoningPartDone {
                item_id: item_id(),
                part,
            }
        }
        "response.completed" => Meaning::Completed,
        "response.failed" | "response.incomplete" => {
            let problem = e.response.and_then(parse::<Problem>).unwrap_or_default();
            let error = problem.error.unwrap_or_default();
            let reason = problem.incomplete_details.and_then(|d| d.reason);
            let message = match (error.message, reason) {
                (Some(message), _) => message,
                (None, Some(reason)) => format!("the response is incomplete: {reason}"),
                (None, None) if e.kind.ends_with("incomplete") => {
                    "the response is incomplete".into()
                }
                (None, None) => "the response failed".into(),
            };
            let code = error.code.and_then(code_text);
            Meaning::Failed { message, code }
        }
        "error" => {
            // OpenAI puts `message` and `code` at the top; some gateways nest an `error`.
            let nested = e.error.and_then(parse::<ErrorBody>).unwrap_or_default();
            let message = e.message.and_then(string).map(Cow::into_owned);
            let message = message.or(nested.message);
            let code = e.code.and_then(parse::<serde_json::Value>).or(nested.code);
            Meaning::Failed {
                message: message.unwrap_or_else(|| "the gateway reported an error".into()),
                code: code.and_then(code_text),
            }
        }
        _ => Meaning::Other,
    }
}

fn parse<'a, T: Deserialize<'a>>(raw: &'a RawValue) -> Option<T> {
    serde_json::from_str(raw.get()).ok()
}

fn string<'a>(raw: &'a RawValue) -> Option<Cow<'a, str>> {
    parse::<Cow<'a, str>>(raw)
}

fn code_text(code: serde_json::Value) -> Option<String> {
    match code {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reasoning_and_endings_are_read() {
        let (_, m) =
            read(br#"{"type":"response.output_text.delta","item_id":"m1","delta":"Hi \"x\""}"#)
                .expect("valid");
        assert_eq!(
            m,
            Meaning::TextDelta {
                item_id: Some("m1".into()),
                delta: "Hi \"x\"".into()
            }
        );
        let done = br#"{"type":"response.output_item.done","item":{"id":"m1","type":"message","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"no"},{"type":"output_text","text":"b"}]}}"#;
        let (_, m) = read(done).expect("valid");
        assert_eq!(
            m,
            Meaning::ItemDone {
                kind: "message".into(),
                id: Some("m1".into()),
                text: "ab".into()
            }
        );
        let failed = br#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"model overloaded"}}}"#;
        let (_, m) = read(failed).expect("valid");
        assert_eq!(
            m,
            Meaning::Failed {
                message: "model overloaded".into(),
                code: Some("server_error".into())
            }
        );
        let error = br#"{"type":"error","code":null,"message":"rate limited","param":null}"#;
        let (_, m) = read(error).expect("valid");
        assert_eq!(
            m,
            Meaning::Failed {
                message: "rate limited".into(),
                code: None
            }
        );
        let incomplete = br#"{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}"#;
        let (_, m) = read(incomplete).expect("valid");
        let message = "the response is incomplete: max_output_tokens".to_string();
        assert_eq!(
            m,
            Meaning::Failed {
                message,
                code: None
            }
        );
        let summary = br#"{"type":"response.reasoning_summary_text.delta","item_id":"rs","summary_index":1,"delta":"think"}"#;
        let (_, m) = read(summary).expect("valid");
        assert_eq!(
            m,
            Meaning::ReasoningDelta {
                item_id: Some("rs".into()),
                part: 1,
                delta: "think".into()
            }
        );
        assert!(read(b"[DONE]").is_err());
        assert_eq!(
            read(br#"{"type":"response.created","response":{}}"#)
                .expect("valid")
                .1,
            Meaning::Other
        );
    }
}
