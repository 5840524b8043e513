//! Responses API request bodies on their way to the gateway: a client that replays a response's
//! output as the next request's `input` (openai-agents' `to_input_list()`, or the AI SDK's
//! `item_reference`s when `store` is on) would hand the gateway toolpulse's companion items,
//! which it never made. [`strip_companions`] removes them; nothing else changes.

use serde_json::value::RawValue;

use super::members;
use crate::profiles::openai::COMPANION_PREFIX;

/// The item types toolpulse's companions have.
const COMPANION_TYPES: &[&str] = &["mcp_call", "web_search_call", "file_search_call"];

/// The body without the `input` items that are companions (or `item_reference`s to them);
/// `None` when there is none, or the body is not a JSON object with an `input` list. Removed
/// items are cut out of the array's text, so every other byte stays as it was, but for the
/// separators between the array's items.
pub fn strip_companions(body: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut input = None;
    members::each(text, |key, value| {
        if key == "input" {
            input = Some(value);
        }
    })
    .ok()?;
    let input = input?;
    let items: Vec<&RawValue> = serde_json::from_str(input.get()).ok()?;
    let kept: Vec<&str> = items
        .iter()
        .filter(|item| !is_companion(item))
        .map(|item| item.get())
        .collect();
    if kept.len() == items.len() {
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

fn is_companion(item: &RawValue) -> bool {
    let (mut kind, mut id) = (None, None);
    let read = members::each(item.get(), |key, value| match key {
        "type" => kind = members::string(value).ok().flatten(),
        "id" => id = members::string(value).ok().flatten(),
        _ => {}
    });
    let ours = id.is_some_and(|id| id.starts_with(COMPANION_PREFIX));
    read.is_ok()
        && ours
        && kind.is_some_and(|k| k == "item_reference" || COMPANION_TYPES.contains(&&*k))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

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
