//! Where a Responses event lists its output: the items of a response object's `output` array
//! (their kinds, call ids, ids, and where each lies in the event's data), so that the items
//! toolpulse shows can be spliced into the list; and where an item's `arguments` lie in it.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::value::RawValue;

use super::members;
use super::responses::{ItemFields, offset_in, string};

/// A `function_call` item listed in a response's `output`: its `call_id`, and the offset in the
/// event's data just past the item's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedCall<'a> {
    pub call_id: Cow<'a, str>,
    pub end: usize,
}

/// The `function_call` items of the `response.output` array of an event's data, in order;
/// empty when there is none or the shape is unexpected.
pub fn listed_calls(data: &[u8]) -> Vec<ListedCall<'_>> {
    let Some(listing) = listed_items(data) else {
        return Vec::new();
    };
    let calls = listing.items.into_iter().filter_map(|item| {
        let call_id = item.call_id.filter(|_| item.kind == ListedKind::Call)?;
        Some(ListedCall {
            call_id,
            end: item.span.end,
        })
    });
    calls.collect()
}

/// What a listed item is, as far as tool calls go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedKind {
    Call,
    Output,
    /// A hosted item of the gateway's own (`mcp_call`, `web_search_call`, `file_search_call`).
    Hosted,
    Other,
}

/// One item of a `response.output` list: its kind, its `call_id` (calls and outputs), its `id`,
/// and where its JSON lies in the event's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedItem<'a> {
    pub kind: ListedKind,
    pub call_id: Option<Cow<'a, str>>,
    pub id: Option<Cow<'a, str>>,
    pub span: Range<usize>,
}

/// The `response.output` list of an event's data: where the array lies, and its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<'a> {
    pub span: Range<usize>,
    pub items: Vec<ListedItem<'a>>,
}

/// The items of the `response.output` array of an event's data; `None` when there is none or
/// the shape is unexpected.
pub fn listed_items<'a>(data: &'a [u8]) -> Option<Listing<'a>> {
    let text = std::str::from_utf8(data).ok()?;
    let output = members::get(members::get(text, "response")?, "output")?;
    let items = serde_json::from_str::<Vec<&RawValue>>(output).ok()?;
    let start = offset_in(text, output);
    let items = items.into_iter().map(|item| {
        let fields = ItemFields::read(item.get()).ok();
        let kind = fields.as_ref().and_then(|f| string(f.kind).ok().flatten());
        let kind = match kind.as_deref() {
            Some("function_call") => ListedKind::Call,
            Some("function_call_output") => ListedKind::Output,
            Some("mcp_call" | "web_search_call" | "file_search_call") => ListedKind::Hosted,
            _ => ListedKind::Other,
        };
        let field = |f: fn(&ItemFields<'a>) -> Option<&'a str>| {
            fields.as_ref().and_then(|x| string(f(x)).ok().flatten())
        };
        let call_id = field(|f| f.call_id);
        let id = field(|f| f.id);
        let at = offset_in(text, item.get());
        ListedItem {
            kind,
            call_id,
            id,
            span: at..at + item.get().len(),
        }
    });
    Some(Listing {
        span: start..start + output.len(),
        items: items.collect(),
    })
}

/// Where an item's `arguments` string lies in its JSON (quotes included); `None` when it has
/// none (or `null`), or it is not a string, or the item cannot be read.
pub fn arguments_span(item: &str) -> Option<Range<usize>> {
    let raw = ItemFields::read(item).ok()?.arguments?;
    let start = offset_in(item, raw);
    raw.starts_with('"').then_some(start..start + raw.len())
}
