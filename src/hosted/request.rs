//! The next turn: before a `POST …/responses` body goes to the gateway, every hosted item of its
//! `input` (or `item_reference` to one) becomes the gateway's own `function_call` and
//! `function_call_output` again, and the `openai` profile's companions are removed. The gateway's
//! model sees the history it would have seen without toolpulse (docs/hosted.md).

use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::id::{self, Key};
use super::store::PairStore;
use crate::dialect::request::{COMPANION_TYPES, ItemHead, Replace, rewrite_input};
use crate::profiles::openai::COMPANION_PREFIX;

/// What the text of an output that could not be kept says.
pub const LOST_OUTPUT: &str = "(toolpulse: this tool result is no longer available)";

/// How each hosted item of a body was mapped, for metrics and logs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Mapped {
    /// Replaced by the pair the store kept.
    pub from_store: u64,
    /// Replaced by a pair built from the item itself (the store no longer had it, or its id
    /// did not verify).
    pub from_content: u64,
    /// `item_reference`s to a hosted item the store no longer had: left out.
    pub dropped: u64,
    /// Companion items (and references to them) removed.
    pub companions: u64,
}

impl Mapped {
    pub fn any(&self) -> bool {
        *self != Mapped::default()
    }
}

/// The body with hosted items mapped back and companions removed; `None` when it has neither.
pub fn map_input(
    body: &[u8],
    key: &Key,
    store: &dyn PairStore,
    now: Instant,
) -> (Option<Vec<u8>>, Mapped) {
    let mut mapped = Mapped::default();
    let out = rewrite_input(body, |head, item| {
        let (Some(kind), Some(item_id)) = (head.kind.as_deref(), head.id.as_deref()) else {
            return Replace::Keep;
        };
        let ours_type = kind == "item_reference" || COMPANION_TYPES.contains(&kind);
        if !ours_type {
            return Replace::Keep;
        }
        if item_id.starts_with(COMPANION_PREFIX) {
            mapped.companions += 1;
            return Replace::Drop;
        }
        if !id::is_hosted(item_id) {
            return Replace::Keep;
        }
        // The store is looked up only by an id this deployment made.
        let call_id = key.verify(item_id);
        if call_id.is_some()
            && let Some(pair) = store.get(item_id, now)
        {
            mapped.from_store += 1;
            return Replace::With(pair.input_items());
        }
        match from_content(head, item, call_id.as_deref().unwrap_or(item_id)) {
            Some(pair) => {
                mapped.from_content += 1;
                Replace::With(pair)
            }
            None => {
                mapped.dropped += 1;
                Replace::Drop
            }
        }
    });
    (out, mapped)
}

/// The ids of the hosted items (and references to them) in a body's `input` that this
/// deployment signed: the only ids the store is ever asked for.
pub fn signed_ids(body: &[u8], key: &Key) -> Vec<String> {
    let mut ids = Vec::new();
    if memchr::memmem::find(body, id::PREFIX.as_bytes()).is_none() {
        return ids;
    }
    rewrite_input(body, |head, _| {
        if let Some(item_id) = head.id.as_deref()
            && id::is_hosted(item_id)
            && key.verify(item_id).is_some()
        {
            ids.push(item_id.to_string());
        }
        Replace::Keep
    });
    ids
}

/// The most faithful pair an item gives by itself: a full `mcp_call` carries name, arguments
/// and output; a search call its query; an `item_reference` nothing (`None`).
fn from_content(head: &ItemHead<'_>, item: &RawValue, call_id: &str) -> Option<String> {
    let item: Value = serde_json::from_str(item.get()).ok()?;
    let text = |v: &Value| v.as_str().map(str::to_string);
    let (name, arguments, output) = match head.kind.as_deref()? {
        "mcp_call" => {
            let name = text(&item["name"])?;
            let arguments = text(&item["arguments"]).unwrap_or_else(|| "{}".into());
            let error = item["error"]["content"][0]["text"].as_str();
            let output = text(&item["output"])
                .or_else(|| error.map(str::to_string))
                .unwrap_or_else(|| LOST_OUTPUT.into());
            (name, arguments, output)
        }
        "web_search_call" => {
            let query = item["action"]["query"].clone();
            let arguments = json!({ "query": query }).to_string();
            ("web_search".to_string(), arguments, LOST_OUTPUT.to_string())
        }
        "file_search_call" => {
            let queries = item["queries"].as_array().cloned().unwrap_or_default();
            let arguments = match queries.as_slice() {
                [one] => json!({ "query": one }),
                _ => json!({ "queries": queries }),
            };
            let output = match &item["results"] {
                Value::Null => LOST_OUTPUT.to_string(),
                results => results.to_string(),
            };
            ("file_search".to_string(), arguments.to_string(), output)
        }
        _ => return None,
    };
    let call = json!({
        "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
        "status": "completed",
    });
    let output = json!({"type": "function_call_output", "call_id": call_id, "output": output});
    Some(format!("{call},{output}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::hosted::store::{MemoryStore, Pair};

    fn setup() -> (Key, MemoryStore, Instant) {
        let store = MemoryStore::new(100, 1 << 20, Duration::from_secs(60));
        (Key::new(b"a key of sixteen bytes"), store, Instant::now())
    }

    fn input(body: &[u8]) -> Value {
        let v: Value = serde_json::from_slice(body).expect("JSON");
        v["input"].clone()
    }

    #[test]
    fn items_and_references_become_the_gateways_pair() {
        let (key, store, now) = setup();
        let web = key.id_for("call_web", 1);
        let mcp = key.id_for("call_mcp", 1);
        let call = r#"{"type":"function_call","id":"fc_1","call_id":"call_web","name":"web_search","arguments":"{\"query\":\"q\"}","status":"completed"}"#;
        let output = r#"{"type":"function_call_output","id":"fco_1","call_id":"call_web","output":"[{\"title\":\"exact\"}]"}"#;
        let pair = Pair {
            call_item: call.into(),
            output_item: output.into(),
        };
        store.put(&web, pair, now);
        let body = format!(
            r#"{{"model":"m","input":[{{"role":"user","content":"hi"}},{{"type":"item_reference","id":"{web}"}},{{"type":"mcp_call","id":"{mcp}","name":"lookup","arguments":"{{}}","output":"42","status":"completed","server_label":"s"}},{{"type":"mcp_call","id":"tp_call_x"}},{{"type":"message","id":"msg_1","role":"assistant","content":[]}}],"stream":true}}"#
        );
        let (out, mapped) = map_input(body.as_bytes(), &key, &store, now);
        let out = out.expect("changed");
        assert_eq!(
            mapped,
            Mapped {
                from_store: 1,
                from_content: 1,
                dropped: 0,
                companions: 1
            }
        );
        let items = input(&out);
        let types: Vec<_> = items
            .as_array()
            .expect("list")
            .iter()
            .map(|i| i["type"].clone())
            .collect();
        assert_eq!(
            types,
            [
                Value::Null,
                json!("function_call"),
                json!("function_call_output"),
                json!("function_call"),
                json!("function_call_output"),
                json!("message")
            ]
        );
        let text = String::from_utf8(out).expect("utf-8");
        assert!(
            text.contains(call) && text.contains(output),
            "verbatim: {text}"
        );
        assert_eq!(items[3]["call_id"], "call_mcp", "the verified call id");
        assert_eq!(items[4]["output"], "42");
        assert!(text.ends_with(r#","stream":true}"#));
    }

    #[test]
    fn unverified_ids_never_reach_the_store() {
        let (key, store, now) = setup();
        let theirs = Key::new(b"another deployment!!").id_for("call_1", 1);
        let pair = Pair {
            call_item: "{\"secret\":1}".into(),
            output_item: "{\"secret\":2}".into(),
        };
        store.put(&theirs, pair, now);
        let body = format!(
            r#"{{"input":[{{"type":"item_reference","id":"{theirs}"}},{{"type":"web_search_call","id":"{theirs}","status":"completed","action":{{"type":"search","query":"q"}}}}]}}"#
        );
        let (out, mapped) = map_input(body.as_bytes(), &key, &store, now);
        let text = String::from_utf8(out.expect("changed")).expect("utf-8");
        assert!(!text.contains("secret"), "{text}");
        assert_eq!(mapped.dropped, 1, "the reference");
        assert_eq!(mapped.from_content, 1, "the full item");
        let items = input(text.as_bytes());
        assert_eq!(items[0]["name"], "web_search");
        assert_eq!(items[0]["arguments"], r#"{"query":"q"}"#);
        assert_eq!(
            items[0]["call_id"],
            theirs.as_str(),
            "its own id: nothing verified"
        );
        assert_eq!(items[1]["output"], LOST_OUTPUT);
    }

    #[test]
    fn bodies_without_hosted_items_are_left_alone() {
        let (key, store, now) = setup();
        for body in [
            &br#"{"input":"text"}"#[..],
            br#"{"input":[{"type":"function_call","id":"fc","call_id":"c"}]}"#,
            br#"{"input":[{"type":"mcp_call","id":"mcp_1"}]}"#,
            b"not json",
        ] {
            assert_eq!(
                map_input(body, &key, &store, now),
                (None, Mapped::default())
            );
        }
    }
}
