//! The JSON-RPC the MCP front reads, sans-IO: `tools/call` requests in a POST body (single or
//! batch), and `notifications/progress` and responses in the server's answers.
//!
//! A request body is changed only to add toolpulse's progress token to calls that carry none,
//! and then by splicing text at the right offsets: every other byte (number forms, key order,
//! whitespace) reaches the server as the gateway wrote it. Whatever is not understood (invalid
//! JSON, a `_meta` that is not an object, an unusual token) is left untouched and not followed.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::features::progress::Progress;

/// A `tools/call` request found in a POST body.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The request's `id`, as JSON text (matched against the response's).
    pub id: String,
    pub tool: String,
    pub arguments: Value,
    pub token: Token,
    /// `params._meta.traceparent`, if given.
    pub traceparent: Option<String>,
}

/// Whose progress token a call carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// Added by toolpulse: its notifications are consumed.
    Ours(String),
    /// The gateway's: its notifications are used and forwarded.
    Theirs(Value),
}

/// What [`prepare`] found in a request body.
#[derive(Debug, Default, PartialEq)]
pub struct Prepared {
    /// The body with toolpulse's tokens added; `None` when it is unchanged.
    pub body: Option<Vec<u8>>,
    pub calls: Vec<ToolCall>,
    /// The JSON-RPC methods of the body, for the log (at most [`MAX_LOGGED_METHODS`]).
    pub methods: Vec<String>,
    /// `tools/call` requests past `max_calls`: forwarded as they are, not followed.
    pub skipped: usize,
}

pub const MAX_LOGGED_METHODS: usize = 8;
/// Method names are logged; a longer one is not a real MCP method.
const MAX_LOGGED_METHOD_CHARS: usize = 64;

#[derive(Deserialize)]
struct Envelope<'a> {
    method: Option<String>,
    id: Option<Value>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(rename = "_meta", borrow, default, deserialize_with = "present")]
    meta: Option<&'a RawValue>,
}

/// A member that is present, even as `null` (serde's `Option` would take `null` for absent, and
/// toolpulse would then add a second `_meta`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Meta {
    #[serde(rename = "progressToken", default, deserialize_with = "present_value")]
    progress_token: Option<Value>,
    traceparent: Option<Value>,
}

/// Like [`present`]: a `progressToken` of `null` is there (and not understood).
fn present_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Finds the `tools/call` requests of a POST body (at most `max_calls` of them; the rest are
/// forwarded without a token of toolpulse's) and gives each one without a progress token a
/// token from `new_token`.
pub fn prepare(body: &[u8], max_calls: usize, mut new_token: impl FnMut() -> String) -> Prepared {
    let Ok(text) = std::str::from_utf8(body) else {
        return Prepared::default();
    };
    let messages: Vec<&RawValue> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text).unwrap_or_default()
    } else {
        serde_json::from_str(text)
            .map(|m| vec![m])
            .unwrap_or_default()
    };
    let mut prepared = Prepared::default();
    let mut splices: Vec<(usize, String)> = Vec::new();
    for message in messages {
        let Ok(envelope) = serde_json::from_str::<Envelope>(message.get()) else {
            continue;
        };
        if let Some(method) = &envelope.method
            && prepared.methods.len() < MAX_LOGGED_METHODS
        {
            prepared
                .methods
                .push(method.chars().take(MAX_LOGGED_METHOD_CHARS).collect());
        }
        if envelope.method.as_deref() != Some("tools/call") {
            continue;
        }
        if prepared.calls.len() >= max_calls {
            prepared.skipped += 1;
            continue;
        }
        let (Some(id), Some(params)) = (envelope.id, envelope.params) else {
            continue;
        };
        if let Some((call, splice)) = read_call(text, id, params, &mut new_token) {
            prepared.calls.push(call);
            splices.extend(splice);
        }
    }
    if !splices.is_empty() {
        prepared.body = Some(apply(text, splices));
    }
    prepared
}

/// One `tools/call`'s params: the call, and the text to insert if it needs toolpulse's token.
fn read_call(
    text: &str,
    id: Value,
    params: &RawValue,
    new_token: &mut impl FnMut() -> String,
) -> Option<(ToolCall, Option<(usize, String)>)> {
    // serde would also read a struct from an array; only objects can take a member.
    let is_object = |raw: &RawValue| raw.get().starts_with('{');
    if !is_object(params) {
        return None;
    }
    let call: CallParams = serde_json::from_str(params.get()).ok()?;
    let meta: Option<Meta> = match call.meta {
        Some(meta) if !is_object(meta) => return None,
        Some(meta) => Some(serde_json::from_str(meta.get()).ok()?),
        None => None,
    };
    let (given, traceparent) = match meta {
        Some(meta) => (meta.progress_token, meta.traceparent),
        None => (None, None),
    };
    let (token, splice) = match given {
        Some(token @ (Value::String(_) | Value::Number(_))) => (Token::Theirs(token), None),
        Some(_) => return None,
        None => {
            let ours = new_token();
            let quoted = Value::String(ours.clone()).to_string();
            let splice = match call.meta {
                Some(meta) => insert_member(text, meta, &format!("\"progressToken\":{quoted}")),
                None => insert_member(
                    text,
                    params,
                    &format!("\"_meta\":{{\"progressToken\":{quoted}}}"),
                ),
            };
            (Token::Ours(ours), Some(splice))
        }
    };
    let call = ToolCall {
        id: id.to_string(),
        tool: call.name,
        arguments: call.arguments.unwrap_or(Value::Null),
        token,
        traceparent: traceparent.and_then(|t| t.as_str().map(str::to_string)),
    };
    Some((call, splice))
}

/// Where and what to insert so that `object` (a JSON object within `text`) gets `member` first.
fn insert_member(text: &str, object: &RawValue, member: &str) -> (usize, String) {
    // `object` borrows from `text`, so its offset there is the distance between the pointers.
    let start = object.get().as_ptr() as usize - text.as_ptr() as usize;
    let empty = object.get()[1..].trim_start().starts_with('}');
    let insert = if empty {
        member.to_string()
    } else {
        format!("{member},")
    };
    (start + 1, insert)
}

fn apply(text: &str, mut splices: Vec<(usize, String)>) -> Vec<u8> {
    splices.sort_by_key(|(at, _)| *at);
    let mut out = Vec::with_capacity(text.len() + splices.iter().map(|s| s.1.len()).sum::<usize>());
    let mut done = 0;
    for (at, insert) in splices {
        out.extend_from_slice(&text.as_bytes()[done..at]);
        out.extend_from_slice(insert.as_bytes());
        done = at;
    }
    out.extend_from_slice(&text.as_bytes()[done..]);
    out
}

/// A message of a server's answer, as far as the front cares.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// `notifications/progress`.
    Progress {
        token: Value,
        progress: Progress,
    },
    /// A response (result or error) to the request with this `id` (as JSON text).
    Response {
        id: String,
    },
    Other,
}

#[derive(Deserialize)]
struct ProgressParams {
    #[serde(rename = "progressToken")]
    progress_token: Value,
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
}

/// The messages in one SSE event's data (a message or a batch); empty when it is not JSON-RPC.
pub fn read_messages(data: &[u8]) -> Vec<Message> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Vec::new();
    };
    if text.trim_start().starts_with('[') {
        let batch: Vec<&RawValue> = serde_json::from_str(text).unwrap_or_default();
        return batch.iter().map(|m| read_message(m.get())).collect();
    }
    vec![read_message(text)]
}

fn read_message(text: &str) -> Message {
    let Ok(envelope) = serde_json::from_str::<Envelope>(text) else {
        return Message::Other;
    };
    match (envelope.method.as_deref(), envelope.id, envelope.params) {
        (Some("notifications/progress"), None, Some(params)) => {
            match serde_json::from_str::<ProgressParams>(params.get()) {
                Ok(p) => Message::Progress {
                    token: p.progress_token,
                    progress: Progress {
                        progress: p.progress,
                        total: p.total,
                        message: p.message,
                    },
                },
                Err(_) => Message::Other,
            }
        }
        (None, Some(id), _) => Message::Response { id: id.to_string() },
        _ => Message::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("tp-{n}")
        }
    }

    fn prepared(body: &str) -> (String, Vec<ToolCall>) {
        let p = prepare(body.as_bytes(), 64, tokens());
        let out = p.body.map_or(body.to_string(), |b| {
            String::from_utf8(b).expect("utf-8 stays utf-8")
        });
        (out, p.calls)
    }

    #[test]
    fn adds_a_token_where_there_is_none_and_keeps_every_other_byte() {
        let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"x","n":1.50}}}"#;
        let (out, calls) = prepared(body);
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"tp-1"},"name":"search","arguments":{"q":"x","n":1.50}}}"#
        );
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "7");
        assert_eq!(calls[0].tool, "search");
        assert_eq!(calls[0].arguments, serde_json::json!({"q": "x", "n": 1.5}));
        assert_eq!(calls[0].token, Token::Ours("tp-1".into()));
    }

    #[test]
    fn existing_meta_gets_the_token_and_gives_the_traceparent() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let body = format!(
            r#"{{"id":"a","method":"tools/call","params":{{"name":"t","_meta": {{ "traceparent":"{tp}"}} }}}}"#
        );
        let (out, calls) = prepared(&body);
        let expected = format!(
            r#"{{"id":"a","method":"tools/call","params":{{"name":"t","_meta": {{"progressToken":"tp-1", "traceparent":"{tp}"}} }}}}"#
        );
        assert_eq!(out, expected);
        assert_eq!(calls[0].id, "\"a\"");
        assert_eq!(calls[0].traceparent.as_deref(), Some(tp));
        assert_eq!(calls[0].arguments, Value::Null);
        let (out, _) =
            prepared(r#"{"id":1,"method":"tools/call","params":{"name":"t","_meta":{}}}"#);
        assert!(
            out.contains(r#""_meta":{"progressToken":"tp-1"}}"#),
            "{out}"
        );
    }

    #[test]
    fn the_gateways_token_is_kept() {
        let body =
            r#"{"id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":5}}}"#;
        let p = prepare(body.as_bytes(), 64, tokens());
        assert_eq!(p.body, None);
        assert_eq!(p.calls[0].token, Token::Theirs(Value::from(5)));
    }

    #[test]
    fn batches_limits_and_what_is_not_understood() {
        let body = r#"[{"id":1,"method":"tools/call","params":{"name":"a"}},
            {"method":"notifications/initialized"},
            {"id":2,"method":"tools/list"},
            {"id":3,"method":"tools/call","params":{"name":"b","arguments":{}}}]"#;
        let (out, calls) = prepared(body);
        assert_eq!(calls.len(), 2);
        assert!(
            out.contains(r#"{"_meta":{"progressToken":"tp-1"},"name":"a"}"#),
            "{out}"
        );
        assert!(
            out.contains(r#"{"_meta":{"progressToken":"tp-2"},"name":"b","#),
            "{out}"
        );
        let p = prepare(body.as_bytes(), 1, tokens());
        assert_eq!(p.calls.len(), 1, "at most max_calls");
        assert_eq!(
            p.methods,
            [
                "tools/call",
                "notifications/initialized",
                "tools/list",
                "tools/call"
            ]
        );
        for body in [
            "not json",
            r#"{"id":1,"method":"tools/call","params":{"name":"t","_meta":null}}"#,
            r#"{"id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":null}}}"#,
            r#"{"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"id":1,"method":"tools/call","params":["t"]}"#,
            "\u{FEFF}{}",
            r#"{"id":1,"method":"tools/call","params":{"name":"t","_meta":[5,"x"]}}"#,
        ] {
            let p = prepare(body.as_bytes(), 64, tokens());
            assert_eq!((p.body, p.calls), (None, vec![]), "{body}");
        }
        assert_eq!(prepare(b"\xff", 64, tokens()), Prepared::default());
    }

    #[test]
    fn answers() {
        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tp-1","progress":2,"total":5,"message":"step 2/5\r\n"}}"#;
        assert_eq!(
            read_messages(progress),
            [Message::Progress {
                token: Value::from("tp-1"),
                progress: Progress {
                    progress: 2.0,
                    total: Some(5.0),
                    message: Some("step 2/5\r\n".into()),
                },
            }]
        );
        let response =
            br#"[{"jsonrpc":"2.0","id":7,"result":{}},{"jsonrpc":"2.0","id":"x","error":{}}]"#;
        assert_eq!(
            read_messages(response),
            [
                Message::Response { id: "7".into() },
                Message::Response { id: "\"x\"".into() }
            ]
        );
        let request = br#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}"#;
        assert_eq!(read_messages(request), [Message::Other]);
        assert_eq!(read_messages(b"{"), [Message::Other]);
        assert_eq!(read_messages(b"\xff"), []);
    }
}
