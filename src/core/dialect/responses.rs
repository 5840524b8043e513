//! The OpenAI Responses API over SSE: reads an event's JSON for what toolpulse needs: its
//! `sequence_number` and `output_index` (value and exact position, so they can be rewritten in
//! place), its meaning for tool calls ([`Signal`]), and whether a response object lists its
//! output items (where they lie is `listing`'s). Only top-level keys are read; unknown fields
//! are skipped, never dropped from the forwarded bytes (those are never re-serialized).

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;

use kind::{ARGUMENTS_DELTA, CREATED, ITEM_ADDED, ITEM_DONE, always_read};
pub use kind::{LISTS_OUTPUT, Skip, TERMINAL_TYPES, lists_output, may_signal, may_skip};
#[cfg(test)]
use kind::{TEXT_DELTA, leading_type, leading_type_end, leading_type_end_if};

use super::members;
use super::scan::{self, Scan};
use crate::core::lifecycle::track::{CallItem, NativeItem, Signal};
use crate::core::lifecycle::{Kind, OutputFacts};
use crate::core::rules::items::ItemHead;

/// A top-level number (`sequence_number`, `output_index`): its value and where its digits lie
/// in the event's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number {
    pub value: u64,
    pub span: Range<usize>,
}

/// What one event's data says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reading<'a> {
    pub sequence_number: Option<Number>,
    pub output_index: Option<Number>,
    pub signal: Option<Signal<'a>>,
    /// `response.created`: a new response, with indices of its own.
    pub starts_response: bool,
    /// The event carries a `response` whose `output` lists the items so far.
    pub lists_output: bool,
    /// The raw JSON of the item of an `output_item.added`/`.done`.
    pub item: Option<&'a str>,
    /// The `response.id` of an event that starts or lists a response.
    pub response_id: Option<ResponseId<'a>>,
    /// The raw `id` and `type` of the item of an `output_item.added`/`.done` (for the item
    /// rules, [`crate::core::rules::items`]).
    pub item_head: Option<ItemHead<'a>>,
    /// The `item_id` of an event without an `output_index` (a broken upstream's), so that an
    /// event of a hidden item is still known as one.
    pub item_id: Option<Cow<'a, str>>,
}

/// A response's `id`: its value, and where its JSON string lies in the event's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseId<'a> {
    pub value: Cow<'a, str>,
    pub span: Range<usize>,
}

/// The data is not a JSON object of the expected shape: forward it untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable;

/// The top-level members `read` looks at, as raw JSON (never `null`); a repeated key keeps its
/// last value.
#[derive(Default)]
struct Envelope<'a> {
    kind: Option<&'a str>,
    sequence_number: Option<&'a str>,
    output_index: Option<&'a str>,
    item: Option<&'a str>,
    item_id: Option<&'a str>,
    delta: Option<&'a str>,
    response: Option<&'a str>,
}

impl<'a> Envelope<'a> {
    fn read(text: &'a str) -> Result<Self, Unreadable> {
        let mut e = Envelope::default();
        members::each(text, |key, value| match key {
            "type" => e.kind = present(value),
            "sequence_number" => e.sequence_number = present(value),
            "output_index" => e.output_index = present(value),
            "item" => e.item = present(value),
            "item_id" => e.item_id = present(value),
            "delta" => e.delta = present(value),
            "response" => e.response = present(value),
            _ => {}
        })
        .map_err(|_| Unreadable)?;
        Ok(e)
    }
}

/// The members of an output item that matter; a repeated key keeps its last value.
#[derive(Default)]
pub(super) struct ItemFields<'a> {
    pub(super) kind: Option<&'a str>,
    pub(super) id: Option<&'a str>,
    pub(super) call_id: Option<&'a str>,
    pub(super) name: Option<&'a str>,
    pub(super) status: Option<&'a str>,
    pub(super) error: Option<&'a str>,
    pub(super) output: Option<&'a str>,
    pub(super) arguments: Option<&'a str>,
}

impl<'a> ItemFields<'a> {
    pub(super) fn read(text: &'a str) -> Result<Self, Unreadable> {
        let mut f = ItemFields::default();
        members::each(text, |key, value| match key {
            "type" => f.kind = present(value),
            "id" => f.id = present(value),
            "call_id" => f.call_id = present(value),
            "name" => f.name = present(value),
            "status" => f.status = present(value),
            "error" => f.error = present(value),
            "output" => f.output = present(value),
            "arguments" => f.arguments = present(value),
            _ => {}
        })
        .map_err(|_| Unreadable)?;
        Ok(f)
    }
}

/// A member's value, `None` for `null` (as serde reads an `Option`; a later member may set it again).
fn present(value: &str) -> Option<&str> {
    (value != "null").then_some(value)
}

/// A member that should be a string and is something else: the event means nothing for tool
/// calls, but it is still readable (and renumbered), as any client would read it.
pub(super) struct NotAString;

/// A string member: absent or `null` is `None`.
pub(super) fn string(value: Option<&str>) -> Result<Option<Cow<'_, str>>, NotAString> {
    value.map_or(Ok(None), |v| members::string(v).map_err(|_| NotAString))
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

/// The numbers of an event that means nothing else to toolpulse (a text delta, say: most of a
/// stream): all that [`read`] gives of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Numbers {
    pub sequence_number: Option<Number>,
    pub output_index: Option<Number>,
}

impl From<Numbers> for Reading<'_> {
    fn from(numbers: Numbers) -> Self {
        Reading {
            sequence_number: numbers.sequence_number,
            output_index: numbers.output_index,
            ..Reading::default()
        }
    }
}

/// Reads one event's data. `[DONE]` reads as nothing; anything not a JSON object is
/// [`Unreadable`].
///
/// An event whose `type` can mean nothing for tool calls (a text delta, say: most of a stream)
/// is only scanned for its numbers ([`read_numbers`]); the others, and whatever the scan leaves
/// to serde_json, are read whole ([`read_full`]). Both give the same [`Reading`] (tested).
pub fn read<'a>(data: &'a [u8]) -> Result<Reading<'a>, Unreadable> {
    match read_numbers(data)? {
        Some(numbers) => Ok(numbers.into()),
        None => read_full(data),
    }
}

/// The first step of [`read`]: the scan alone. `Some` when the event means nothing but its
/// numbers (its [`Reading`] is those alone), `None` when it must be read whole with
/// [`read_full`] (`[DONE]` too).
pub fn read_numbers(data: &[u8]) -> Result<Option<Numbers>, Unreadable> {
    if data == b"[DONE]" {
        return Ok(None);
    }
    // The events that need serde_json anyway are declined at their `type` (which gateways
    // write first): one pass, not two. The scan checks the data's UTF-8.
    let members = match scan::scan_unless(data, always_read) {
        // Without an `output_index`, the `item_id` is wanted (`Reading::item_id`).
        Scan::Object(members) if members.output_index.is_some() => members,
        Scan::Object(_) | Scan::Decline => return Ok(None),
        Scan::Invalid => return Err(Unreadable),
    };
    let number = |span: Option<std::ops::Range<usize>>| {
        let span = span?;
        Some(Number {
            value: plain_u64(&data[span.clone()])?,
            span,
        })
    };
    Ok(Some(Numbers {
        sequence_number: number(members.sequence_number),
        output_index: number(members.output_index),
    }))
}

/// [`read`] with serde_json, every top-level member visited.
pub fn read_full<'a>(data: &'a [u8]) -> Result<Reading<'a>, Unreadable> {
    if data == b"[DONE]" {
        return Ok(Reading::default());
    }
    let text = std::str::from_utf8(data).map_err(|_| Unreadable)?;
    let envelope = Envelope::read(text)?;
    let number = |raw: Option<&str>| {
        let digits = raw?;
        let start = offset_in(text, digits);
        Some(Number {
            value: plain_u64(digits)?,
            span: start..start + digits.len(),
        })
    };
    let sequence_number = number(envelope.sequence_number);
    let output_index = number(envelope.output_index);
    let kind = string(envelope.kind).ok().flatten();
    let starts_response = kind.as_deref() == Some(CREATED);
    let lists_output = kind.as_deref().is_some_and(|k| LISTS_OUTPUT.contains(&k));
    // Only where it is an output item: the scan (which never sees these types) agrees.
    let item = matches!(kind.as_deref(), Some(ITEM_ADDED | ITEM_DONE))
        .then_some(envelope.item)
        .flatten();
    let response_id = (starts_response || lists_output)
        .then(|| {
            let raw = members::get(envelope.response?, "id")?;
            let start = offset_in(text, raw);
            Some(ResponseId {
                value: string(Some(raw)).ok()??,
                span: start..start + raw.len(),
            })
        })
        .flatten();
    let fields = item.map(ItemFields::read).transpose().unwrap_or_default();
    let item_head = fields.as_ref().map(|f| ItemHead {
        id: f.id,
        kind: f.kind,
        done: kind.as_deref() == Some(ITEM_DONE),
    });
    let signal = match kind.as_deref() {
        Some(t) if TERMINAL_TYPES.contains(&t) => Some(Signal::Terminal),
        Some(t @ (ITEM_ADDED | ITEM_DONE)) => {
            let output_index = envelope.output_index.and_then(plain_u64);
            match &fields {
                Some(item) => item_signal(item, t == ITEM_DONE, output_index),
                None => None,
            }
        }
        Some(ARGUMENTS_DELTA) => {
            let string = |raw: Option<&'a str>| string(raw).ok().flatten();
            match (string(envelope.item_id), string(envelope.delta)) {
                (Some(item_id), Some(delta)) => Some(Signal::ArgumentsDelta { item_id, delta }),
                _ => None,
            }
        }
        _ => None,
    };
    let item_id = match output_index {
        None => string(envelope.item_id).ok().flatten(),
        Some(_) => None,
    };
    Ok(Reading {
        sequence_number,
        output_index,
        signal,
        starts_response,
        lists_output,
        item,
        response_id,
        item_head,
        item_id,
    })
}

/// Where `part` (a slice of `text`) starts in it.
pub(super) fn offset_in(text: &str, part: &str) -> usize {
    part.as_ptr() as usize - text.as_ptr() as usize
}

/// What an output item means for tool calls; nothing when it is not an object or a member that
/// matters has the wrong type.
fn item_signal<'a>(
    item: &ItemFields<'a>,
    done: bool,
    output_index: Option<u64>,
) -> Option<Signal<'a>> {
    let strings = || -> Result<_, NotAString> {
        Ok((
            string(item.kind)?,
            string(item.call_id)?,
            string(item.id)?,
            string(item.name)?,
            string(item.status)?,
            string(item.arguments)?,
        ))
    };
    let (Some(kind), call_id, id, name, status, arguments) = strings().ok()? else {
        return None;
    };
    let facts = || OutputFacts {
        status: status.clone(),
        error: item.error.map(Cow::Borrowed),
        texts: item.output.map(output_texts).unwrap_or_default(),
    };
    let native = match &*kind {
        "mcp_call" => Some(Kind::Mcp),
        "web_search_call" => Some(Kind::WebSearch),
        "file_search_call" => Some(Kind::FileSearch),
        _ => None,
    };
    if let (Some(kind), Some(item_id)) = (native, &id) {
        return Some(Signal::Native(NativeItem {
            item_id: item_id.clone(),
            kind,
            name: name.clone(),
            arguments: arguments.clone(),
            done,
            facts: facts(),
        }));
    }
    let call_id = call_id?;
    match &*kind {
        "function_call" => {
            let call = CallItem {
                call_id,
                item_id: id,
                output_index,
                name: name.unwrap_or_default(),
                arguments,
            };
            Some(if done {
                Signal::CallDone(call)
            } else {
                Signal::CallAdded(call)
            })
        }
        "function_call_output" => Some(Signal::Output {
            call_id,
            facts: facts(),
        }),
        _ => None,
    }
}

/// The text of an output: a string, or the `text` of each part of a list of parts.
fn output_texts(output: &str) -> Vec<Cow<'_, str>> {
    if let Ok(Some(text)) = members::string(output) {
        return vec![text];
    }
    serde_json::from_str::<Vec<Part<'_>>>(output)
        .map(|parts| parts.into_iter().filter_map(|p| p.text).collect())
        .unwrap_or_default()
}

/// The most digits of a number that always fits a `u64` (`u64::MAX` has 20).
const MAX_SAFE_DIGITS: usize = 19;

/// A JSON number that is a plain non-negative integer (no sign, fraction or exponent) that
/// fits a `u64`.
fn plain_u64(digits: impl AsRef<[u8]>) -> Option<u64> {
    let digits = digits.as_ref();
    if digits.is_empty() {
        return None;
    }
    if digits.len() <= MAX_SAFE_DIGITS {
        // No overflow to check.
        return digits.iter().try_fold(0u64, |n, &b| {
            let digit = b.wrapping_sub(b'0');
            (digit <= 9).then(|| n * 10 + u64::from(digit))
        });
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

mod kind;
#[cfg(test)]
mod tests;
