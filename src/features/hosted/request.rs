//! The next turn: before a `POST …/responses` body goes to the gateway, every hosted item of its
//! `input` (or `item_reference` to one) becomes the gateway's own `function_call` and
//! `function_call_output` again, and the `openai` profile's companions are removed. The gateway's
//! model sees the history it would have seen without toolpulse (docs/hosted.md).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use memchr::memmem::Finder;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::id::{self, Key};
pub use super::refusal::{Refusal, Unmapped};
use super::scan::SignedIdScan;
use super::shared::Found;
use crate::core::dialect::request::{
    COMPANION_TYPES, ItemHead, Replace, Rewritten, TopLevel, is_object, repeated_key, rewrite_input,
};
use crate::core::ids::COMPANION_PREFIX;
use crate::metrics::Mapping;

/// What the text of an output that could not be kept says.
pub const LOST_OUTPUT: &str = "(toolpulse: this tool result is no longer available)";

/// How each hosted item of a body was mapped, for metrics and logs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Mapped {
    /// Replaced by the pair the store kept.
    pub from_store: u64,
    /// Replaced by a pair built from the item itself (the store no longer had it, it is
    /// another caller's, or its id did not verify).
    pub from_content: u64,
    /// Companion items (and references to them) removed.
    pub companions: u64,
}

impl Mapped {
    pub fn any(&self) -> bool {
        *self != Mapped::default()
    }

    /// The counts by the `outcome` label of `toolpulse_hosted_mappings_total`.
    pub fn by_mapping(&self) -> [(Mapping, u64); 3] {
        [
            (Mapping::Store, self.from_store),
            (Mapping::Content, self.from_content),
            (Mapping::CompanionRemoved, self.companions),
        ]
    }
}

/// A next turn's body as the mapping reads it: its top-level members, found once, and whether
/// it may hold a hosted id at all (most bodies do not: then no id is verified or looked up).
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    pub top: TopLevel<'a>,
    hosted: bool,
}

impl<'a> Turn<'a> {
    pub fn of(top: TopLevel<'a>) -> Turn<'a> {
        let hosted = may_hold_hosted_ids(top.bytes());
        Turn { top, hosted }
    }
}

/// The body with hosted items mapped back and companions removed, planned within `limit`
/// bytes (`None` when it has neither); or why it cannot be forwarded. A full hosted item maps
/// from the store when its caller's pair is there, else from its own content (it leaks nothing
/// and loses nothing the item did not already lose); an `item_reference` has no content, so one
/// that cannot be mapped is refused rather than left out.
pub fn map_input<'a>(
    turn: &Turn<'a>,
    key: &Key,
    found: &Found,
    limit: usize,
) -> Result<(Option<Rewritten<'a>>, Mapped), Refusal> {
    let body = turn.top.bytes();
    if turn.hosted {
        // A lenient gateway may read what toolpulse cannot, or read another of two keys.
        let repeated = repeated_key(body);
        if (repeated.is_some() || !is_object(body)) && holds_signed_id(body, key) {
            return Err(match repeated {
                Some(what) => Refusal::Ambiguous { what },
                None => Refusal::Unreadable,
            });
        }
    }
    let mut mapped = Mapped::default();
    let mut refused = None;
    // One text per id, however many items name it.
    let mut texts: HashMap<String, Arc<str>> = HashMap::new();
    let out = rewrite_input(&turn.top, limit, |head, item| {
        if refused.is_some() {
            return Replace::Keep;
        }
        match map_item(head, item, key, found, &mut texts, &mut mapped) {
            Ok(replace) => replace,
            Err(refusal) => {
                refused = Some(refusal);
                Replace::Keep
            }
        }
    });
    if let Some(refusal) = refused {
        return Err(refusal);
    }
    Ok((out?, mapped))
}

fn map_item(
    head: &ItemHead<'_>,
    item: &RawValue,
    key: &Key,
    found: &Found,
    texts: &mut HashMap<String, Arc<str>>,
    mapped: &mut Mapped,
) -> Result<Replace, Refusal> {
    // Readers disagree on which `type` or `id` counts: none is mapped.
    if head.repeated && may_hold_hosted_ids(item.get().as_bytes()) {
        let what = "the type or id of an input item".to_string();
        return Err(Refusal::Ambiguous { what });
    }
    let Some(item_id) = head.id.as_deref() else {
        return Ok(Replace::Keep);
    };
    // An `item_reference`'s `type` may be left out (OpenAI's API allows it).
    let kind = head.kind.as_deref().unwrap_or("item_reference");
    if kind != "item_reference" && !COMPANION_TYPES.contains(&kind) {
        return Ok(Replace::Keep);
    }
    if item_id.starts_with(COMPANION_PREFIX) && head.kind.is_some() {
        mapped.companions += 1;
        return Ok(Replace::Drop);
    }
    if !id::is_hosted(item_id) {
        return Ok(Replace::Keep);
    }
    let unavailable = |why| Refusal::Unavailable {
        id: item_id.to_string(),
        kind: kind.to_string(),
        why,
    };
    // The store is looked up only by an id this deployment made.
    let verified = key.verify(item_id);
    let why = match &verified {
        Some(_) => match found.get(item_id) {
            Ok(pair) => {
                mapped.from_store += 1;
                let text = texts
                    .entry(item_id.to_string())
                    .or_insert_with(|| Arc::from(pair.input_items()));
                return Ok(Replace::With(text.clone()));
            }
            Err(gone) => Unmapped::Gone(gone),
        },
        None => Unmapped::Unverified,
    };
    // Without a verified id, the call id the id carries (else the id itself).
    let call_id = verified
        .or_else(|| id::carried_call_id(item_id))
        .unwrap_or_else(|| item_id.to_string());
    match from_content(head, item, &call_id) {
        Some(pair) => {
            mapped.from_content += 1;
            Ok(Replace::With(Arc::from(pair)))
        }
        None => Err(unavailable(why)),
    }
}

/// Whether a body may hold a hosted id at all: one written plainly, or with JSON escapes.
fn may_hold_hosted_ids(body: &[u8]) -> bool {
    // Searchers made once: building one costs more than searching a small body with it.
    static PLAIN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(id::PREFIX));
    static ESCAPED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
    PLAIN.find(body).is_some() || ESCAPED.find(body).is_some()
}

/// Whether the body holds, anywhere, an id this deployment signed.
pub fn holds_signed_id(body: &[u8], key: &Key) -> bool {
    SignedIdScan::new(key.clone()).feed(body)
}

/// The distinct ids of the hosted items (and references to them) in a body's `input` that
/// this deployment signed: the only ids the store is ever asked for, each once.
pub fn signed_ids(turn: &Turn<'_>, key: &Key) -> Vec<String> {
    let mut ids = Vec::new();
    if !turn.hosted {
        return ids;
    }
    let mut seen = HashSet::new();
    let _ = rewrite_input(&turn.top, usize::MAX, |head, _| {
        if let Some(item_id) = head.id.as_deref()
            && id::is_hosted(item_id)
            && !seen.contains(item_id)
            && key.verify(item_id).is_some()
        {
            seen.insert(item_id.to_string());
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
mod tests;
