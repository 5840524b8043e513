//! The OpenAI Responses API over SSE: reads an event's JSON for what toolpulse needs: its
//! `sequence_number` and `output_index` (value and exact position, so they can be rewritten in
//! place), its meaning for tool calls ([`Signal`]), and where a response object lists its
//! output items (so companions can be spliced in). Only top-level keys are read; unknown fields
//! are skipped, never dropped from the forwarded bytes (those are never re-serialized).

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::members;
use super::scan::{self, Scan};
use crate::core::lifecycle::track::{CallItem, NativeItem, Signal};
use crate::core::lifecycle::{Kind, OutputFacts};
use crate::core::rules::items::ItemHead;

/// Event types that end a response: open calls are closed just before them.
const TERMINAL_TYPES: &[&str] = &[
    "response.completed",
    "response.failed",
    "response.incomplete",
    "error",
];
/// Event types whose `response` object lists the output so far.
const LISTS_OUTPUT: &[&str] = &[
    "response.completed",
    "response.failed",
    "response.incomplete",
    "response.in_progress",
    "response.queued",
];
const CREATED: &str = "response.created";
const ITEM_ADDED: &str = "response.output_item.added";
const ITEM_DONE: &str = "response.output_item.done";
const ARGUMENTS_DELTA: &str = "response.function_call_arguments.delta";

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

/// Whether an event of this type (from its `event:` line) can carry a [`Signal`]; others need
/// not be parsed unless their `sequence_number` must change.
pub fn may_signal(event_type: &[u8]) -> bool {
    event_type == ITEM_ADDED.as_bytes()
        || event_type == CREATED.as_bytes()
        || event_type == ITEM_DONE.as_bytes()
        || event_type == ARGUMENTS_DELTA.as_bytes()
        || TERMINAL_TYPES.iter().any(|t| t.as_bytes() == event_type)
}

/// Whether an event may go unread: its `event:` line names a type that can carry no
/// [`Signal`] and lists no output, and its data says the same type. Clients read the data's
/// `type` (the line is only a hint to them): the line is trusted where the data opens with the
/// same `type` and names no other `"type"` (a later member would override it; a nested one, as
/// in a `content_part`, only costs a read). Every gateway seen writes its events so.
pub fn may_skip(line: &[u8], data: &[u8]) -> bool {
    if may_signal(line) || lists_output(line) {
        return false;
    }
    match leading_type_end(data) {
        Some((kind, end)) => kind == line && !names_type(&data[end..]),
        None => false,
    }
}

/// Whether `data` has a `"type"` in it. Found by its `y` (rare in an event's keys: a general
/// substring search costs twice as much on a text delta, measured in `benches/rewrite.rs`).
fn names_type(data: &[u8]) -> bool {
    memchr::memchr_iter(b'y', data).any(|y| y >= 2 && data[y - 2..].starts_with(b"\"type\""))
}

/// The top-level members `read` looks at, as raw JSON (never `null`); a repeated key keeps its
/// last value.
#[derive(Default)]
struct Envelope<'a> {
    kind: Option<&'a RawValue>,
    sequence_number: Option<&'a RawValue>,
    output_index: Option<&'a RawValue>,
    item: Option<&'a RawValue>,
    item_id: Option<&'a RawValue>,
    delta: Option<&'a RawValue>,
    response: Option<&'a RawValue>,
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
struct ItemFields<'a> {
    kind: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    call_id: Option<&'a RawValue>,
    name: Option<&'a RawValue>,
    status: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    output: Option<&'a RawValue>,
    arguments: Option<&'a RawValue>,
}

impl<'a> ItemFields<'a> {
    fn read(text: &'a str) -> Result<Self, Unreadable> {
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
fn present(value: &RawValue) -> Option<&RawValue> {
    (value.get() != "null").then_some(value)
}

/// A member that should be a string and is something else: the event means nothing for tool
/// calls, but it is still readable (and renumbered), as any client would read it.
struct NotAString;

/// A string member: absent or `null` is `None`.
fn string(value: Option<&RawValue>) -> Result<Option<Cow<'_, str>>, NotAString> {
    value.map_or(Ok(None), |v| members::string(v).map_err(|_| NotAString))
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

/// Reads one event's data. `[DONE]` reads as nothing; anything not a JSON object is
/// [`Unreadable`].
///
/// An event whose `type` can mean nothing for tool calls (a text delta, say: most of a stream)
/// is only scanned for its numbers ([`scan`]); the others, and whatever the scan leaves to
/// serde_json, are read whole ([`read_full`]). Both give the same [`Reading`] (tested).
pub fn read<'a>(data: &'a [u8]) -> Result<Reading<'a>, Unreadable> {
    if data == b"[DONE]" {
        return Ok(Reading::default());
    }
    // The events that need serde_json anyway name their type first: one pass, not two.
    if leading_type(data).is_some_and(|k| may_signal(k) || lists_output(k)) {
        return read_full(data);
    }
    let text = std::str::from_utf8(data).map_err(|_| Unreadable)?;
    let members = match scan::scan(data) {
        // Without an `output_index`, the `item_id` is wanted (`Reading::item_id`).
        Scan::Object(members) if members.output_index.is_some() => members,
        Scan::Object(_) | Scan::Decline => return read_full(data),
        Scan::Invalid => return Err(Unreadable),
    };
    if let Some(kind) = &members.kind {
        let kind = &data[kind.clone()];
        let escaped = memchr::memchr(b'\\', kind).is_some();
        let unquoted = kind.strip_prefix(b"\"").and_then(|k| k.strip_suffix(b"\""));
        if escaped || unquoted.is_some_and(|k| may_signal(k) || lists_output(k)) {
            return read_full(data);
        }
    }
    let number = |span: Option<std::ops::Range<usize>>| {
        let span = span?;
        Some(Number {
            value: plain_u64(&text[span.clone()])?,
            span,
        })
    };
    Ok(Reading {
        sequence_number: number(members.sequence_number),
        output_index: number(members.output_index),
        ..Reading::default()
    })
}

/// The value of a `type` member that opens the object, when it is a plain string (as every
/// gateway seen writes its events). A later `type` member would override it: only a hint.
fn leading_type(data: &[u8]) -> Option<&[u8]> {
    leading_type_end(data).map(|(kind, _)| kind)
}

/// [`leading_type`], and where its closing quote ends in `data`.
fn leading_type_end(data: &[u8]) -> Option<(&[u8], usize)> {
    let rest = data.strip_prefix(b"{\"type\":")?;
    let rest = rest
        .strip_prefix(b" ")
        .unwrap_or(rest)
        .strip_prefix(b"\"")?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    let start = data.len() - rest.len();
    (rest[end] == b'"').then(|| (&rest[..end], start + end + 1))
}

/// Whether an event of this type carries a `response` whose `output` lists the items so far.
pub fn lists_output(kind: &[u8]) -> bool {
    LISTS_OUTPUT.iter().any(|t| t.as_bytes() == kind)
}

/// [`read`] with serde_json, every top-level member visited.
pub fn read_full<'a>(data: &'a [u8]) -> Result<Reading<'a>, Unreadable> {
    if data == b"[DONE]" {
        return Ok(Reading::default());
    }
    let text = std::str::from_utf8(data).map_err(|_| Unreadable)?;
    let envelope = Envelope::read(text)?;
    let number = |raw: Option<&RawValue>| {
        let digits = raw?.get();
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
        .flatten()
        .map(RawValue::get);
    let response_id = (starts_response || lists_output)
        .then(|| {
            let raw = members::get(envelope.response?.get(), "id")?;
            let start = offset_in(text, raw.get());
            Some(ResponseId {
                value: string(Some(raw)).ok()??,
                span: start..start + raw.get().len(),
            })
        })
        .flatten();
    let fields = item.map(ItemFields::read).transpose().unwrap_or_default();
    let item_head = fields.as_ref().map(|f| ItemHead {
        id: f.id.map(RawValue::get),
        kind: f.kind.map(RawValue::get),
        done: kind.as_deref() == Some(ITEM_DONE),
    });
    let signal = match kind.as_deref() {
        Some(t) if TERMINAL_TYPES.contains(&t) => Some(Signal::Terminal),
        Some(t @ (ITEM_ADDED | ITEM_DONE)) => {
            let output_index = envelope.output_index.and_then(|r| plain_u64(r.get()));
            match &fields {
                Some(item) => item_signal(item, t == ITEM_DONE, output_index),
                None => None,
            }
        }
        Some(ARGUMENTS_DELTA) => {
            let string = |raw: Option<&'a RawValue>| string(raw).ok().flatten();
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
fn offset_in(text: &str, part: &str) -> usize {
    part.as_ptr() as usize - text.as_ptr() as usize
}

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
    let output = members::get(members::get(text, "response")?.get(), "output")?;
    let items = serde_json::from_str::<Vec<&RawValue>>(output.get()).ok()?;
    let start = offset_in(text, output.get());
    let items = items.into_iter().map(|item| {
        let fields = ItemFields::read(item.get()).ok();
        let kind = fields.as_ref().and_then(|f| string(f.kind).ok().flatten());
        let kind = match kind.as_deref() {
            Some("function_call") => ListedKind::Call,
            Some("function_call_output") => ListedKind::Output,
            Some("mcp_call" | "web_search_call" | "file_search_call") => ListedKind::Hosted,
            _ => ListedKind::Other,
        };
        let field = |f: fn(&ItemFields<'a>) -> Option<&'a RawValue>| {
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
        span: start..start + output.get().len(),
        items: items.collect(),
    })
}

/// Where an item's `arguments` string lies in its JSON (quotes included); `None` when it has
/// none (or `null`), or it is not a string, or the item cannot be read.
pub fn arguments_span(item: &str) -> Option<Range<usize>> {
    let raw = ItemFields::read(item).ok()?.arguments?.get();
    let start = offset_in(item, raw);
    raw.starts_with('"').then_some(start..start + raw.len())
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
        error: item.error.map(|e| Cow::Borrowed(e.get())),
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
fn output_texts(output: &RawValue) -> Vec<Cow<'_, str>> {
    if let Ok(text) = serde_json::from_str::<Cow<'_, str>>(output.get()) {
        return vec![text];
    }
    serde_json::from_str::<Vec<Part<'_>>>(output.get())
        .map(|parts| parts.into_iter().filter_map(|p| p.text).collect())
        .unwrap_or_default()
}

/// A JSON number that is a plain non-negative integer (no sign, fraction or exponent).
fn plain_u64(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_event_whose_line_and_data_agree_on_a_quiet_type_may_go_unread() {
        let delta = b"response.output_text.delta";
        let data = br#"{"type":"response.output_text.delta","delta":"say \"type\""}"#;
        assert!(may_skip(delta, data));
        assert!(may_skip(
            delta,
            br#"{"type": "response.output_text.delta"}"#
        ));
        // The line lies, or the data names its type elsewhere, or twice.
        assert!(!may_skip(b"response.output_text.deltx", data));
        assert!(!may_skip(
            delta,
            br#"{"delta":"","type":"response.output_text.delta"}"#
        ));
        let twice = br#"{"type":"response.output_text.delta","type":"response.output_item.added"}"#;
        assert!(!may_skip(delta, twice));
        // Types that can signal are always read.
        let added = b"response.output_item.added";
        assert!(!may_skip(
            added,
            br#"{"type":"response.output_item.added"}"#
        ));
        assert!(!may_skip(
            b"response.completed",
            br#"{"type":"response.completed"}"#
        ));
    }

    #[test]
    fn leading_type_is_a_plain_string_that_opens_the_object() {
        assert_eq!(leading_type(br#"{"type":"a.b","x":1}"#), Some(&b"a.b"[..]));
        assert_eq!(leading_type(br#"{"type": "a.b"}"#), Some(&b"a.b"[..]));
        assert_eq!(leading_type(br#"{"type":"a\u002eb"}"#), None);
        assert_eq!(leading_type(br#"{ "type":"a"}"#), None);
        assert_eq!(leading_type(br#"{"x":1,"type":"a"}"#), None);
        assert_eq!(leading_type(br#"{"type":1}"#), None);
        assert_eq!(leading_type(br#"{"type":"unterminated"#), None);
    }

    mod scan_agrees_with_serde_json {
        use super::*;
        use proptest::prelude::*;

        fn agree(data: &[u8]) {
            assert_eq!(
                read(data),
                read_full(data),
                "{}",
                String::from_utf8_lossy(data)
            );
        }

        #[test]
        fn on_every_fixture_event() {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
            let mut dirs = vec![root];
            let mut events = 0;
            while let Some(dir) = dirs.pop() {
                for entry in std::fs::read_dir(&dir).expect("fixtures").flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        dirs.push(path);
                        continue;
                    }
                    if path.extension().is_none_or(|e| e != "sse") {
                        continue;
                    }
                    let mut parser = crate::core::sse::Parser::new(usize::MAX);
                    parser.push(&std::fs::read(&path).expect("fixture"));
                    parser.finish();
                    while let Some(item) = parser.next_item() {
                        if let crate::core::sse::Item::Event(event) = item
                            && let Some(data) = event.data()
                        {
                            agree(&data);
                            events += 1;
                        }
                    }
                }
            }
            assert!(events > 1000, "{events} events");
        }

        /// Pieces of JSON, valid and not, that the scanner must judge as serde_json does.
        const TOKENS: &[&str] = &[
            "{",
            "}",
            "[",
            "]",
            ":",
            ",",
            " ",
            "\n",
            "\"type\"",
            "\"sequence_number\"",
            "\"output_index\"",
            "\"item\"",
            "\"response.output_text.delta\"",
            "\"response.completed\"",
            "\"response.output_item.added\"",
            "0",
            "12",
            "-3",
            "1.5",
            "2e3",
            "01",
            "1.",
            "null",
            "true",
            "fals",
            "\"a\\\"b\"",
            "\"\\u00e9\"",
            "\"\\ud800\"",
            "\"\\x\"",
            "\"\u{1}\"",
            "\"é☃\"",
            "\"type\\u0020\"",
            "\"",
            "\\",
            "18446744073709551616",
        ];

        fn value() -> impl Strategy<Value = serde_json::Value> {
            use serde_json::Value;
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<u64>().prop_map(Value::from),
                any::<i32>().prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::from),
                "[ -~é\\u{1}-\\u{1f}\"\\\\]{0,8}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 32, 4, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4)
                        .prop_map(serde_json::Value::Array),
                    proptest::collection::btree_map("[a-z_]{0,6}", inner, 0..4)
                        .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #[test]
            fn on_token_soup(tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..40)) {
                agree(tokens.concat().as_bytes());
            }

            #[test]
            fn on_events_with_any_values(
                members in proptest::collection::vec(
                    (prop_oneof![
                        Just("type"), Just("sequence_number"), Just("output_index"),
                        Just("delta"), Just("item")
                    ], value()),
                    0..6,
                ),
                kind in proptest::sample::select(&["response.output_text.delta", "response.completed", "response.output_item.done", "x"][..]),
                cut in any::<prop::sample::Index>(),
            ) {
                let mut text = format!("{{\"type\":\"{kind}\"");
                for (key, value) in &members {
                    text += &format!(",\"{key}\":{value}");
                }
                text += "}";
                agree(text.as_bytes());
                // And cut short anywhere.
                let at = cut.index(text.len() + 1);
                if text.is_char_boundary(at) {
                    agree(&text.as_bytes()[..at]);
                }
            }
        }
    }

    #[test]
    fn sequence_number_value_and_span() {
        let data = br#"{"type":"x","response":{"sequence_number":99},"sequence_number":12}"#;
        let r = read(data).expect("readable");
        let seq = r.sequence_number.expect("numbered");
        assert_eq!(seq.value, 12);
        assert_eq!(&data[seq.span], b"12");
        assert_eq!(r.signal, None);
    }

    #[test]
    fn odd_sequence_numbers_are_not_renumbered() {
        for data in [
            &br#"{"sequence_number":-1}"#[..],
            br#"{"sequence_number":1.0}"#,
            br#"{"sequence_number":"1"}"#,
            br#"{"sequence_number":1e2}"#,
            br#"{"sequence_number":null}"#,
        ] {
            assert_eq!(read(data).map(|r| r.sequence_number), Ok(None), "{data:?}");
        }
    }

    #[test]
    fn function_call_items() {
        let added = br#"{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"item_7","type":"function_call","status":"in_progress","name":"web_search","call_id":"call_7","arguments":""}}"#;
        let Some(Signal::CallAdded(call)) = read(added).expect("ok").signal else {
            panic!("expected CallAdded")
        };
        assert_eq!(call.call_id, "call_7");
        assert_eq!(call.item_id.as_deref(), Some("item_7"));
        assert_eq!(call.output_index, Some(1));
        assert_eq!(call.name, "web_search");
        let done = br#"{"type":"response.output_item.done","item":{"type":"function_call","call_id":"c","name":"n"}}"#;
        assert!(matches!(
            read(done).expect("ok").signal,
            Some(Signal::CallDone(_))
        ));
    }

    #[test]
    fn outputs_string_parts_status_and_error() {
        let s = br#"{"type":"response.output_item.added","item":{"type":"function_call_output","call_id":"c","status":"completed","output":"search failed: x"}}"#;
        let Some(Signal::Output { call_id, facts }) = read(s).expect("ok").signal else {
            panic!("expected Output")
        };
        assert_eq!(call_id, "c");
        assert_eq!(facts.status.as_deref(), Some("completed"));
        assert_eq!(facts.texts, vec!["search failed: x"]);
        let parts = br#"{"type":"response.output_item.added","item":{"type":"function_call_output","call_id":"c","error":{"m":1},"output":[{"type":"input_text","text":"a"},{"type":"input_image"}]}}"#;
        let Some(Signal::Output { facts, .. }) = read(parts).expect("ok").signal else {
            panic!("expected Output")
        };
        assert_eq!(facts.error.as_deref(), Some(r#"{"m":1}"#));
        assert_eq!(facts.texts, vec!["a"]);
        let null_error = br#"{"type":"response.output_item.added","item":{"type":"function_call_output","call_id":"c","error":null}}"#;
        let Some(Signal::Output { facts, .. }) = read(null_error).expect("ok").signal else {
            panic!("expected Output")
        };
        assert_eq!(facts.error, None);
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_as_clients_read_it() {
        let data =
            br#"{"type":"a","sequence_number":1,"type":"response.completed","sequence_number":7}"#;
        let r = read(data).expect("readable");
        assert_eq!(r.signal, Some(Signal::Terminal));
        let seq = r.sequence_number.expect("numbered");
        assert_eq!((seq.value, &data[seq.span]), (7, &b"7"[..]));
        let data = br#"{"type":"response.completed","type":null}"#;
        assert_eq!(read(data).expect("readable").signal, None);
        let item = br#"{"type":"response.output_item.done","item":{"type":"function_call","call_id":"a","name":"x","call_id":"b"}}"#;
        let Some(Signal::CallDone(call)) = read(item).expect("readable").signal else {
            panic!("expected CallDone")
        };
        assert_eq!(call.call_id, "b");
    }

    #[test]
    fn native_items_terminal_done_and_garbage() {
        let native = br#"{"type":"response.output_item.added","item":{"type":"mcp_call","id":"m","name":"x"}}"#;
        let Some(Signal::Native(item)) = read(native).expect("ok").signal else {
            panic!("a native item")
        };
        assert_eq!(
            (&*item.item_id, item.kind, item.done),
            ("m", Kind::Mcp, false)
        );
        assert_eq!(item.name.as_deref(), Some("x"));
        let done = br#"{"type":"response.output_item.done","item":{"type":"mcp_call","id":"m","status":"completed","output":"42","error":null}}"#;
        let Some(Signal::Native(item)) = read(done).expect("ok").signal else {
            panic!("a native item")
        };
        assert!(item.done);
        assert_eq!(item.facts.texts, ["42"]);
        assert_eq!(item.facts.error, None);
        let no_id = br#"{"type":"response.output_item.added","item":{"type":"web_search_call"}}"#;
        assert_eq!(read(no_id).expect("ok").signal, None);
        let nested_error = br#"{"type":"error","error":{"type":"server_error","message":"x"}}"#;
        assert_eq!(
            read(nested_error).expect("ok").signal,
            Some(Signal::Terminal)
        );
        assert_eq!(read(b"[DONE]"), Ok(Reading::default()));
        for bad in [&b"not json"[..], b"[1]", b"\xff"] {
            assert_eq!(read(bad), Err(Unreadable), "{bad:?}");
        }
        // Readable (so renumbered), but meaning nothing for tool calls.
        for odd in [
            &br#"{"type":5,"sequence_number":3}"#[..],
            br#"{"type":"response.output_item.done","sequence_number":3,"item":{"type":"function_call","call_id":"c","name":1}}"#,
            br#"{"type":"response.output_item.done","sequence_number":3,"item":{"typ":"function_call","call_id":"c"}}"#,
            br#"{"type":"response.output_item.done","sequence_number":3,"item":[]}"#,
        ] {
            let reading = read(odd).expect("readable");
            assert_eq!(reading.signal, None, "{odd:?}");
            assert_eq!(reading.sequence_number.map(|s| s.value), Some(3));
        }
        assert!(may_signal(b"response.output_item.done"));
        assert!(!may_signal(b"response.output_text.delta"));
    }
}
