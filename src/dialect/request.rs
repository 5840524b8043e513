//! Responses API request bodies on their way to the gateway: a client that replays a response's
//! output as the next request's `input` (openai-agents' `to_input_list()`, or the AI SDK's
//! `item_reference`s when `store` is on) would hand the gateway toolpulse's companion items,
//! which it never made. [`strip_companions`] removes them; nothing else changes.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::members;
use crate::profiles::openai::COMPANION_PREFIX;

/// The item types toolpulse's companions (and hosted items) have.
pub const COMPANION_TYPES: &[&str] = &["mcp_call", "web_search_call", "file_search_call"];

/// The body without the `input` items that are companions (or `item_reference`s to them);
/// `None` when there is none, or the body is not a JSON object with an `input` list. Removed
/// items are cut out of the array's text, so every other byte stays as it was, but for the
/// separators between the array's items.
pub fn strip_companions(body: &[u8]) -> Option<Vec<u8>> {
    rewrite_input(body, |head, _| match is_companion(head) {
        true => Replace::Drop,
        false => Replace::Keep,
    })
}

/// What becomes of one `input` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replace {
    Keep,
    Drop,
    /// These items instead (JSON objects, already joined by `,`).
    With(String),
}

/// The `type` and `id` of an input item.
#[derive(Debug, Default)]
pub struct ItemHead<'a> {
    pub kind: Option<Cow<'a, str>>,
    pub id: Option<Cow<'a, str>>,
}

/// The body with each item of its `input` list kept, dropped or replaced as `decide` says;
/// `None` when nothing changed, or the body is not a JSON object with an `input` list. Only the
/// array's text changes: kept items keep their bytes, separators become `,`.
pub fn rewrite_input(
    body: &[u8],
    mut decide: impl FnMut(&ItemHead<'_>, &RawValue) -> Replace,
) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let input = members::get(text, "input")?;
    let items: Vec<&RawValue> = serde_json::from_str(input.get()).ok()?;
    let mut changed = false;
    let mut kept: Vec<Cow<'_, str>> = Vec::with_capacity(items.len());
    for item in items {
        let mut head = ItemHead::default();
        let read = members::each(item.get(), |key, value| match key {
            "type" => head.kind = members::string(value).ok().flatten(),
            "id" => head.id = members::string(value).ok().flatten(),
            _ => {}
        });
        let decision = match read {
            Ok(()) => decide(&head, item),
            Err(_) => Replace::Keep,
        };
        match decision {
            Replace::Keep => kept.push(Cow::Borrowed(item.get())),
            Replace::Drop => changed = true,
            Replace::With(items) => {
                changed = true;
                kept.push(Cow::Owned(items));
            }
        }
    }
    if !changed {
        return None;
    }
    let start = input.get().as_ptr() as usize - text.as_ptr() as usize;
    let end = start + input.get().len();
    let mut out = Vec::with_capacity(body.len());
    out.extend_from_slice(&body[..start]);
    out.push(b'[');
    out.extend_from_slice(kept.join(",").as_bytes());
    out.push(b']');
    out.extend_from_slice(&body[end..]);
    Some(out)
}

/// The body with its top-level `previous_response_id` replaced by `id` (every other byte as
/// it was); `None` when it has none or the body is not a JSON object.
pub fn set_previous_response_id(body: &[u8], id: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let raw = members::get(text, "previous_response_id")?;
    let new = serde_json::Value::from(id).to_string();
    let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
    let mut out = Vec::with_capacity(body.len() + new.len());
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(new.as_bytes());
    out.extend_from_slice(&body[start + raw.get().len()..]);
    Some(out)
}

/// The top-level `previous_response_id` of a body, when it is a string.
pub fn previous_response_id(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    members::string(members::get(text, "previous_response_id")?)
        .ok()?
        .map(Cow::into_owned)
}

/// The names of the `function` tools a request declares in its `tools` (their calls are the
/// client's to run); empty when it declares none or the body is not a JSON object.
pub fn declared_functions(body: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Tool<'a> {
        #[serde(borrow, rename = "type")]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow)]
        name: Option<Cow<'a, str>>,
    }
    let Some(tools) = std::str::from_utf8(body)
        .ok()
        .and_then(|text| members::get(text, "tools"))
    else {
        return Vec::new();
    };
    let Ok(tools) = serde_json::from_str::<Vec<&RawValue>>(tools.get()) else {
        return Vec::new();
    };
    let tools = tools
        .into_iter()
        .filter_map(|tool| serde_json::from_str::<Tool<'_>>(tool.get()).ok());
    tools
        .filter(|tool| tool.kind.as_deref() == Some("function"))
        .filter_map(|tool| tool.name.map(Cow::into_owned))
        .collect()
}

fn is_companion(head: &ItemHead<'_>) -> bool {
    let ours = head
        .id
        .as_deref()
        .is_some_and(|id| id.starts_with(COMPANION_PREFIX));
    ours && head
        .kind
        .as_deref()
        .is_some_and(|k| k == "item_reference" || COMPANION_TYPES.contains(&k))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn previous_response_id_is_read_and_replaced_in_place() {
        let body = br#"{"input":"hi", "previous_response_id" : "resp_a","x":{"previous_response_id":"no"}}"#;
        assert_eq!(previous_response_id(body).as_deref(), Some("resp_a"));
        let out = set_previous_response_id(body, "resp_\"b").expect("set");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            r#"{"input":"hi", "previous_response_id" : "resp_\"b","x":{"previous_response_id":"no"}}"#
        );
        for none in [
            &br#"{"input":"hi"}"#[..],
            br#"{"previous_response_id":null}"#,
            b"[1]",
        ] {
            assert_eq!(previous_response_id(none), None);
        }
        assert_eq!(set_previous_response_id(br#"{"a":1}"#, "x"), None);
    }

    #[test]
    fn removes_companions_and_references_to_them() {
        let body = br#"{"model":"m", "input": [ {"type":"function_call","id":"fc_1","call_id":"c1"}, {"type":"mcp_call","id":"tp_c1","status":"completed"}, {"type":"item_reference","id":"tp_c2"}, {"type":"item_reference","id":"msg_1"}, {"type":"message","id":"tp_user_msg","role":"user","content":"hi"} ] ,"stream":true}"#;
        let out = strip_companions(body).expect("changed");
        let v: Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(
            v["input"],
            json!([
                {"type":"function_call","id":"fc_1","call_id":"c1"},
                {"type":"item_reference","id":"msg_1"},
                {"type":"message","id":"tp_user_msg","role":"user","content":"hi"}
            ])
        );
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.starts_with(r#"{"model":"m", "input": [{"type":"function_call""#));
        assert!(text.ends_with(r#"] ,"stream":true}"#), "{text}");
    }

    #[test]
    fn declared_function_tools_by_name() {
        let body = br#"{"tools":[{"type":"function","name":"web_search","parameters":{}},{"type":"web_search"},{"type":"mcp","server_label":"x"},{"type":"function","name":"lookup"}],"input":"hi"}"#;
        assert_eq!(declared_functions(body), ["web_search", "lookup"]);
        assert!(declared_functions(br#"{"input":"hi"}"#).is_empty());
        assert!(declared_functions(br#"{"tools":"no"}"#).is_empty());
        assert!(declared_functions(b"not json").is_empty());
    }

    #[test]
    fn everything_else_is_left_alone() {
        for body in [
            &br#"{"input":"just text"}"#[..],
            br#"{"input":[{"type":"function_call_output","call_id":"c","output":"x"}]}"#,
            br#"{"model":"m"}"#,
            br#"not json {"input":[{"type":"mcp_call","id":"tp_x"}]}"#,
            br#"{"input":[{"type":"mcp_call","id":"mcp_x"}]}"#,
            b"\xff",
        ] {
            assert_eq!(strip_companions(body), None, "{body:?}");
        }
        let all = br#"{"input":[{"type":"web_search_call","id":"tp_a"}]}"#;
        assert_eq!(
            strip_companions(all).as_deref(),
            Some(&br#"{"input":[]}"#[..])
        );
    }
}
