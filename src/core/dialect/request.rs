//! Responses API request bodies on their way to the gateway: a client that replays a response's
//! output as the next request's `input` (openai-agents' `to_input_list()`, or the AI SDK's
//! `item_reference`s when `store` is on) would hand the gateway toolpulse's companion items,
//! which it never made. [`strip_companions`] removes them; nothing else changes.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::{members, scan};
use crate::core::ids::COMPANION_PREFIX;

/// The item types toolpulse's companions (and hosted items) have.
pub const COMPANION_TYPES: &[&str] = &["mcp_call", "web_search_call", "file_search_call"];

/// The body without the `input` items that are companions (or `item_reference`s to them);
/// `None` when there is none, or the body is not a JSON object with an `input` list. Removed
/// items are cut out of the array's text, so every other byte stays as it was, but for the
/// separators between the array's items.
pub fn strip_companions(body: &[u8]) -> Option<Vec<u8>> {
    let top = TopLevel::of(body);
    let rewritten = rewrite_input(&top, usize::MAX, |head, _| match is_companion(head) {
        true => Replace::Drop,
        false => Replace::Keep,
    });
    rewritten.ok().flatten().map(Rewritten::into_bytes)
}

/// The top-level members of a request body that toolpulse reads (`input`, `tools`,
/// `previous_response_id`), found in one pass over it, each as [`members::get`] finds it: its
/// raw JSON text, the last occurrence (as clients read it), `None` when absent or `null`, and
/// all `None` when the body is not one JSON object.
#[derive(Debug, Clone, Copy)]
pub struct TopLevel<'a> {
    body: &'a [u8],
    /// The body, when it is UTF-8.
    text: Option<&'a str>,
    input: Option<&'a str>,
    tools: Option<&'a str>,
    previous_response_id: Option<&'a str>,
}

impl<'a> TopLevel<'a> {
    pub fn of(body: &'a [u8]) -> TopLevel<'a> {
        let mut top = TopLevel::none(body);
        let Ok(text) = std::str::from_utf8(body) else {
            return top;
        };
        let scanned = scan::visit_members(body, |key, value| top.note(&text[key], &text[value]));
        if !scanned {
            // serde_json decides; what the scan visited is forgotten.
            top = TopLevel::none(body);
            if members::each(text, |key, value| top.note(key, value)).is_err() {
                top = TopLevel::none(body);
            }
        }
        top.text = Some(text);
        for member in [
            &mut top.input,
            &mut top.tools,
            &mut top.previous_response_id,
        ] {
            *member = member.filter(|value| *value != "null");
        }
        top
    }

    fn none(body: &'a [u8]) -> TopLevel<'a> {
        TopLevel {
            body,
            text: None,
            input: None,
            tools: None,
            previous_response_id: None,
        }
    }

    fn note(&mut self, key: &str, value: &'a str) {
        let member = match key {
            "input" => &mut self.input,
            "tools" => &mut self.tools,
            "previous_response_id" => &mut self.previous_response_id,
            _ => return,
        };
        *member = Some(value);
    }

    /// The body's bytes, as given.
    pub fn bytes(&self) -> &'a [u8] {
        self.body
    }

    /// The top-level `previous_response_id`, when it is a string.
    pub fn previous_response_id(&self) -> Option<String> {
        members::string(self.previous_response_id?)
            .ok()?
            .map(Cow::into_owned)
    }

    /// The names of the `function` tools the request declares in its `tools` (their calls are
    /// the client's to run); empty when it declares none or the body is not a JSON object.
    pub fn declared_functions(&self) -> Vec<String> {
        #[derive(serde::Deserialize)]
        struct Tool<'a> {
            #[serde(borrow, rename = "type")]
            kind: Option<Cow<'a, str>>,
            #[serde(borrow)]
            name: Option<Cow<'a, str>>,
        }
        let Some(tools) = self.tools.filter(|tools| is_list(tools)) else {
            return Vec::new();
        };
        let Ok(tools) = serde_json::from_str::<Vec<&RawValue>>(tools) else {
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
}

/// Whether a raw JSON value may be a list: anything else is not handed to serde_json as one,
/// which would refuse it and build an error saying why.
fn is_list(value: &str) -> bool {
    value
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('[')
}

/// What becomes of one `input` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replace {
    Keep,
    Drop,
    /// These items instead (JSON objects, already joined by `,`). Shared, so that many items
    /// replaced by one text (references to one id) cost one copy until the body is written.
    With(Arc<str>),
}

/// The `type` and `id` of an input item.
#[derive(Debug, Default)]
pub struct ItemHead<'a> {
    pub kind: Option<Cow<'a, str>>,
    pub id: Option<Cow<'a, str>>,
    /// Whether `type` or `id` appears more than once: readers disagree on which one counts.
    pub repeated: bool,
}

/// The rewritten body would be larger than the bound it was given: nothing was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the rewritten body would be over {limit} bytes")]
pub struct TooLarge {
    pub limit: usize,
}

/// A body's new text, planned but not yet written: its length is known before any byte of it
/// is copied, so a caller can charge (or refuse) it first.
#[derive(Debug)]
pub struct Rewritten<'a> {
    body: &'a [u8],
    /// Where the `input` array's text starts and ends in `body`.
    span: (usize, usize),
    items: Vec<Piece<'a>>,
    len: usize,
}

#[derive(Debug)]
enum Piece<'a> {
    Kept(&'a str),
    Shared(Arc<str>),
}

impl Piece<'_> {
    fn text(&self) -> &str {
        match self {
            Piece::Kept(text) => text,
            Piece::Shared(text) => text,
        }
    }
}

impl Rewritten<'_> {
    /// The bytes of the new body.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the new body (one allocation of exactly [`Rewritten::len`] bytes).
    pub fn into_bytes(self) -> Vec<u8> {
        let (start, end) = self.span;
        let mut out = Vec::with_capacity(self.len);
        out.extend_from_slice(&self.body[..start]);
        out.push(b'[');
        for (n, item) in self.items.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(item.text().as_bytes());
        }
        out.push(b']');
        out.extend_from_slice(&self.body[end..]);
        debug_assert_eq!(out.len(), self.len);
        out
    }
}

/// The body with each item of its `input` list kept, dropped or replaced as `decide` says;
/// `Ok(None)` when nothing changed, or the body is not a JSON object with an `input` list. Only
/// the array's text changes: kept items keep their bytes, separators become `,`. The new body
/// is planned, not written: past `limit` bytes the planning stops at once (`TooLarge`), so a
/// body of many small items each replaced by a large one is refused before it is built.
pub fn rewrite_input<'a>(
    top: &TopLevel<'a>,
    limit: usize,
    mut decide: impl FnMut(&ItemHead<'_>, &RawValue) -> Replace,
) -> Result<Option<Rewritten<'a>>, TooLarge> {
    let (Some(text), Some(input)) = (top.text, top.input) else {
        return Ok(None);
    };
    let body = top.body;
    // A text `input` has no items.
    if !is_list(input) {
        return Ok(None);
    }
    let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(input) else {
        return Ok(None);
    };
    let start = input.as_ptr() as usize - text.as_ptr() as usize;
    let end = start + input.len();
    // The text around the array, its brackets, and a separator per item (one too many).
    let mut len = body.len() - (end - start) + 2;
    let mut changed = false;
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        let decision = match head(item.get()) {
            Some(head) => decide(&head, item),
            None => Replace::Keep,
        };
        let piece = match decision {
            Replace::Keep => Piece::Kept(item.get()),
            Replace::Drop => {
                changed = true;
                continue;
            }
            Replace::With(items) => {
                changed = true;
                Piece::Shared(items)
            }
        };
        len = len.saturating_add(piece.text().len() + 1);
        if len.saturating_sub(1) > limit {
            return Err(TooLarge { limit });
        }
        kept.push(piece);
    }
    if !changed {
        return Ok(None);
    }
    let len = len - usize::from(!kept.is_empty());
    Ok(Some(Rewritten {
        body,
        span: (start, end),
        items: kept,
        len,
    }))
}

/// The `type` and `id` of one item; `None` when it is not a JSON object.
fn head(item: &str) -> Option<ItemHead<'_>> {
    let mut head = ItemHead::default();
    let (mut kinds, mut ids) = (0, 0);
    let read = members::each(item, |key, value| match key {
        "type" => {
            kinds += 1;
            head.kind = members::string(value).ok().flatten();
        }
        "id" => {
            ids += 1;
            head.id = members::string(value).ok().flatten();
        }
        _ => {}
    });
    head.repeated = kinds > 1 || ids > 1;
    read.ok().map(|()| head)
}

/// Whether `body` is one JSON object (the only body whose `input` toolpulse maps).
pub fn is_object(body: &[u8]) -> bool {
    std::str::from_utf8(body).is_ok_and(|text| members::each(text, |_, _| {}).is_ok())
}

/// The first key the top level of a JSON object names more than once; `None` when it names
/// each once, or `body` is not a JSON object. Readers of such a body disagree on its meaning:
/// toolpulse reads the last, some gateways the first.
pub fn repeated_key(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let mut seen = std::collections::HashSet::new();
    let mut repeated = None;
    members::each(text, |key, _| {
        if repeated.is_none() && !seen.insert(key.to_string()) {
            repeated = Some(key.to_string());
        }
    })
    .ok()?;
    repeated
}

/// The body with its top-level `previous_response_id` replaced by `id` (every other byte as
/// it was); `None` when it has none or the body is not a JSON object.
pub fn set_previous_response_id(body: &[u8], id: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let raw = members::get(text, "previous_response_id")?;
    let new = serde_json::Value::from(id).to_string();
    let start = raw.as_ptr() as usize - text.as_ptr() as usize;
    let mut out = Vec::with_capacity(body.len() + new.len());
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(new.as_bytes());
    out.extend_from_slice(&body[start + raw.len()..]);
    Some(out)
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
mod tests;
