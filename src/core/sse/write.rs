//! Encoding of the events toolpulse injects.
//!
//! An injected event is `event: <type>` + one `data:` line holding a JSON object whose first
//! keys are `type` and (when the stream is numbered) `sequence_number`, then the profile's
//! fields in order. Framing cannot be broken by upstream strings: the event type is a
//! `&'static str` chosen by toolpulse's code, and every value is serialized by serde_json, which
//! escapes CR, LF and every other control character (U+2028 is not an SSE line ending).

use bytes::{BufMut, BytesMut};
use serde_json::Value;

/// The SSE comment a proxy sends to keep idle connections open.
pub const HEARTBEAT: &[u8] = b": keep-alive\n\n";

/// One event to inject, before it has a sequence number.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub event_type: &'static str,
    /// Whether the block starts with an `event:` line (OpenAI's events do; the other profiles'
    /// seeds send `data:` only, so browser `onmessage` handlers see them).
    pub event_line: bool,
    pub fields: Vec<(&'static str, Value)>,
}

impl NewEvent {
    pub fn new(event_type: &'static str) -> Self {
        NewEvent {
            event_type,
            event_line: true,
            fields: Vec::new(),
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
    pub fn maybe(self, key: &'static str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(value) => self.with(key, value),
            None => self,
        }
    }

    pub fn with(mut self, key: &'static str, value: impl Into<Value>) -> Self {
        self.fields.push((key, value.into()));
        self
    }
}

/// Appends `event` to `out` as one SSE block, numbered `sequence_number` when given.
pub fn encode(out: &mut BytesMut, event: &NewEvent, sequence_number: Option<u64>) {
    debug_assert!(
        !event.event_type.contains(['\r', '\n', '"', '\\']),
        "event types are plain names"
    );
    if event.event_line {
        out.put_slice(b"event: ");
        out.put_slice(event.event_type.as_bytes());
        out.put_u8(b'\n');
    }
    out.put_slice(b"data: {\"type\":\"");
    out.put_slice(event.event_type.as_bytes());
    out.put_u8(b'"');
    if let Some(n) = sequence_number {
        out.put_slice(b",\"sequence_number\":");
        out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    }
    let mut writer = out.writer();
    for (key, value) in &event.fields {
        // Writing JSON into a BytesMut cannot fail: its io::Write never errors.
        let _ = std::io::Write::write_all(&mut writer, b",");
        let _ = serde_json::to_writer(&mut writer, key);
        let _ = std::io::Write::write_all(&mut writer, b":");
        let _ = serde_json::to_writer(&mut writer, value);
    }
    let out = writer.into_inner();
    out.put_slice(b"}\n\n");
}

#[cfg(test)]
mod tests {
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
