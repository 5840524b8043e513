//! Encoding of the events toolpulse injects.
//!
//! An injected event is `event: <type>` + one `data:` line holding a JSON object whose first
//! keys are `type` and (when the stream is numbered) `sequence_number`, then the profile's
//! fields in order. Framing cannot be broken by upstream strings: the event type and the keys
//! are `&'static str`s chosen by toolpulse's code, and every value is serialized by serde_json,
//! which escapes CR, LF and every other control character (U+2028 is not an SSE line ending).
//!
//! A [`NewEvent`] holds its fields already serialized (`,"key":value` each, in order): a
//! profile's values are written once, straight from the borrowed data they come from, with no
//! `serde_json::Value` tree built and dropped between, and [`encode`] copies them whole once
//! the event has its number.

use std::ops::Range;

use bytes::{BufMut, BytesMut};
use serde::Serialize;

use crate::core::dialect::is_plain;

/// The SSE comment a proxy sends to keep idle connections open.
pub const HEARTBEAT: &[u8] = b": keep-alive\n\n";

/// Room for the fields of a typical injected event (a hosted item's are ~200 bytes), so that
/// writing them rarely grows the buffer.
const FIELDS_CAPACITY: usize = 256;

/// One event to inject, before it has a sequence number.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub event_type: &'static str,
    /// Whether the block starts with an `event:` line (OpenAI's events do; the other profiles'
    /// seeds send `data:` only, so browser `onmessage` handlers see them).
    pub event_line: bool,
    /// The fields as compact JSON, each `,"key":value`, in the order they were added.
    fields: Vec<u8>,
    /// Where the value of the `item` field is in `fields`, if the event has one.
    item: Option<Range<usize>>,
}

impl NewEvent {
    pub fn new(event_type: &'static str) -> Self {
        NewEvent {
            event_type,
            event_line: true,
            fields: Vec::new(),
            item: None,
        }
    }

    /// An event without an `event:` line.
    pub fn data_only(event_type: &'static str) -> Self {
        NewEvent {
            event_line: false,
            ..NewEvent::new(event_type)
        }
    }

    /// Adds a field when there is a value for it.
    pub fn maybe(self, key: &'static str, value: Option<impl Serialize>) -> Self {
        match value {
            Some(value) => self.with(key, value),
            None => self,
        }
    }

    /// Adds field `key`, its value serialized now (as `serde_json::to_writer` writes it).
    pub fn with(mut self, key: &'static str, value: impl Serialize) -> Self {
        self.put_key(key);
        let start = self.fields.len();
        // The values are strings, numbers and toolpulse's own structs and `Value`s: none has a
        // map with non-string keys or a `Serialize` that fails, and a `Vec` never fails to write.
        // Were one to fail, the field reads `null` (the event stays valid JSON): no panic here.
        if serde_json::to_writer(&mut self.fields, &value).is_err() {
            debug_assert!(false, "field {key} does not serialize");
            self.fields.truncate(start);
            self.fields.extend_from_slice(b"null");
        }
        if key == "item" {
            self.item = Some(start..self.fields.len());
        }
        self
    }

    /// [`NewEvent::with`] for a string value, written without a second look at its bytes when
    /// none of them needs escaping (the ids and names of most events).
    pub fn with_str(mut self, key: &'static str, value: &str) -> Self {
        self.put_key(key);
        // serde_json escapes `"`, `\` and the control characters below U+0020, nothing else
        // (its `ESCAPE` table): a string without them it writes as it is, between quotes.
        if is_plain(value.as_bytes()) {
            self.fields.push(b'"');
            self.fields.extend_from_slice(value.as_bytes());
            self.fields.push(b'"');
        } else {
            // A `str` always serializes (and a `Vec` never fails to write).
            let _ = serde_json::to_writer(&mut self.fields, value);
        }
        self
    }

    /// `,"key":`, the buffer made room for the event's fields at the first.
    fn put_key(&mut self, key: &'static str) {
        debug_assert!(
            !key.contains(|c: char| c == '"' || c == '\\' || c.is_control()),
            "keys are plain names"
        );
        if self.fields.capacity() == 0 {
            self.fields.reserve(FIELDS_CAPACITY);
        }
        self.fields.extend_from_slice(b",\"");
        self.fields.extend_from_slice(key.as_bytes());
        self.fields.extend_from_slice(b"\":");
    }

    /// The JSON of the `item` field, if the event has one.
    pub fn item_json(&self) -> Option<&[u8]> {
        self.item.clone().map(|range| &self.fields[range])
    }

    /// The value of field `key`, read back from its JSON (for tests).
    #[cfg(test)]
    pub fn field(&self, key: &str) -> Option<serde_json::Value> {
        self.fields_object().remove(key)
    }

    /// The keys of the fields, in order (for tests).
    #[cfg(test)]
    pub fn keys(&self) -> Vec<String> {
        self.fields_object().keys().cloned().collect()
    }

    /// The fields read back as one JSON object (for tests).
    #[cfg(test)]
    fn fields_object(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut object = b"{".to_vec();
        object.extend_from_slice(self.fields.get(1..).unwrap_or_default());
        object.push(b'}');
        serde_json::from_slice(&object).expect("the fields are a JSON object")
    }
}

/// Appends `event` to `out` as one SSE block, numbered `sequence_number` when given.
pub fn encode(out: &mut BytesMut, event: &NewEvent, sequence_number: Option<u64>) {
    debug_assert!(
        !event.event_type.contains(['\r', '\n', '"', '\\']),
        "event types are plain names"
    );
    let event_type = event.event_type.as_bytes();
    // `event: ` type `\n`, `data: {"type":"` type `","sequence_number":` digits, `}\n\n`.
    out.reserve(2 * event_type.len() + event.fields.len() + 64);
    if event.event_line {
        out.put_slice(b"event: ");
        out.put_slice(event_type);
        out.put_u8(b'\n');
    }
    out.put_slice(b"data: {\"type\":\"");
    out.put_slice(event_type);
    out.put_u8(b'"');
    if let Some(n) = sequence_number {
        out.put_slice(b",\"sequence_number\":");
        out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    }
    out.put_slice(&event.fields);
    out.put_slice(b"}\n\n");
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn encodes_type_number_and_fields_in_order() {
        let mut out = BytesMut::new();
        let ev = NewEvent::new("response.mcp_call.in_progress")
            .with("item_id", "fc_1")
            .with("output_index", 1);
        encode(&mut out, &ev, Some(7));
        assert_eq!(
            &out[..],
            b"event: response.mcp_call.in_progress\ndata: {\"type\":\"response.mcp_call.in_progress\",\"sequence_number\":7,\"item_id\":\"fc_1\",\"output_index\":1}\n\n"
        );
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let strings = [
            "",
            "tph_Y2FsbF8x.AAAAAAAAAAB-tkJkB6Hxbm2SqZwyXEtj",
            "quote \" backslash \\ slash / del \u{7f} tab \t nul \0 us \u{1f} sp",
            "é \u{2028} \u{fffd} 🦀",
        ];
        for s in strings {
            let fast = NewEvent::new("t").with_str("k", s);
            assert_eq!(fast, NewEvent::new("t").with("k", s), "{s:?}");
        }
        for b in 0..=0x7fu8 {
            let s = char::from(b).to_string();
            let fast = NewEvent::new("t").with_str("k", &s);
            assert_eq!(fast, NewEvent::new("t").with("k", &s), "{b:#x}");
        }
    }

    #[test]
    fn hostile_strings_cannot_break_framing() {
        let mut out = BytesMut::new();
        let name = "a\r\nevent: x\n\ndata: \"}\u{2028}\0";
        encode(&mut out, &NewEvent::new("t").with("name", name), None);
        let text = std::str::from_utf8(&out).expect("utf-8");
        assert_eq!(text.matches('\n').count(), 3, "only our own line endings");
        assert!(!text.contains('\r'));
        let data = text.lines().nth(1).and_then(|l| l.strip_prefix("data: "));
        let v: Value = serde_json::from_str(data.expect("data line")).expect("valid JSON");
        assert_eq!(v["name"], name);
    }
}
