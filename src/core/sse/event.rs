//! One event block as the parser hands it out ([`Event`]: its exact bytes, and where its fields
//! lie in them), and the [`Item`]s the parser hands out: events, pieces of oversize events, the
//! unterminated tail at EOF.

use std::borrow::Cow;
use std::ops::Range;

use bytes::{Bytes, BytesMut};

/// What the parser hands out, in input order; concatenating every item's bytes gives the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A complete event block, terminated by its blank line.
    Event(Event),
    /// A piece of an event longer than `max_event_bytes`, forwarded without interpretation.
    Oversize(Bytes),
    /// The unterminated tail of the stream at EOF (clients discard it; a proxy forwards it).
    Incomplete(Bytes),
}

/// One event block: its raw bytes and where its fields lie within them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    raw: Bytes,
    fields: Fields,
}

/// Where an event's fields lie in its raw bytes, as the parser finds them line by line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Fields {
    pub event: Option<Range<usize>>,
    /// The first `data` line's value; `more_data` holds the rest (rare), so the usual
    /// single-line event allocates nothing.
    pub data: Option<Range<usize>>,
    pub more_data: Vec<Range<usize>>,
    pub id: Option<Range<usize>>,
    pub retry: Option<u64>,
    pub comment: bool,
}

impl Event {
    /// The event of `raw`, whose fields lie where `fields` says.
    pub(super) fn new(raw: Bytes, fields: Fields) -> Self {
        Event { raw, fields }
    }

    /// The exact bytes of the block, including its terminating blank line.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The `event` field's value (the last one wins), if any.
    pub fn event_type(&self) -> Option<&[u8]> {
        self.fields.event.clone().map(|r| &self.raw[r])
    }

    /// The `data` lines' values joined by `\n`; `None` when the block has no `data` field.
    pub fn data(&self) -> Option<Cow<'_, [u8]>> {
        let first = self.fields.data.clone()?;
        if self.fields.more_data.is_empty() {
            return Some(Cow::Borrowed(&self.raw[first]));
        }
        let mut joined = self.raw[first].to_vec();
        for r in &self.fields.more_data {
            joined.push(b'\n');
            joined.extend_from_slice(&self.raw[r.clone()]);
        }
        Some(Cow::Owned(joined))
    }

    /// Where [`Event::data`] lies in [`Event::raw`] when it is one `data` line (the usual
    /// event): byte `i` of the data is byte `start + i` of the raw bytes.
    pub fn data_range(&self) -> Option<Range<usize>> {
        match &self.fields.data {
            Some(first) if self.fields.more_data.is_empty() => Some(first.clone()),
            _ => None,
        }
    }

    /// Maps a byte offset within [`Event::data`] to the offset of the same byte in [`Event::raw`].
    /// `None` for the `\n` that joins two data lines or past the end.
    pub fn raw_offset_of_data(&self, mut offset: usize) -> Option<usize> {
        let first = self.fields.data.as_ref()?;
        for r in std::iter::once(first).chain(&self.fields.more_data) {
            if offset < r.len() {
                return Some(r.start + offset);
            }
            offset = offset.checked_sub(r.len() + 1)?;
        }
        None
    }

    /// Writes the block with its data replaced by `data`: as `data` lines (one per `\n` in it)
    /// where its first `data` line was, its other `data` lines left out, every other line as it
    /// was. For edits that cannot be made in place (a range across two `data` lines).
    pub fn write_with_data(&self, data: &[u8], out: &mut BytesMut) {
        let Some(first) = &self.fields.data else {
            return out.extend_from_slice(&self.raw);
        };
        let raw = &self.raw[..];
        let mut from = 0;
        for (i, value) in std::iter::once(first)
            .chain(&self.fields.more_data)
            .enumerate()
        {
            let start = raw[..value.start]
                .iter()
                .rposition(|&b| b == b'\n' || b == b'\r')
                .map_or(0, |p| p + 1);
            let end = match raw[value.end..] {
                [b'\r', b'\n', ..] => value.end + 2,
                [b'\r' | b'\n', ..] => value.end + 1,
                _ => value.end,
            };
            out.extend_from_slice(&raw[from..start]);
            if i == 0 {
                for line in data.split(|&b| b == b'\n') {
                    out.extend_from_slice(b"data: ");
                    out.extend_from_slice(line);
                    out.extend_from_slice(b"\n");
                }
            }
            from = end;
        }
        out.extend_from_slice(&raw[from..]);
    }

    /// The `id` field's value (the last one without a NUL wins), if any.
    pub fn id(&self) -> Option<&[u8]> {
        self.fields.id.clone().map(|r| &self.raw[r])
    }

    /// The `retry` field's value, if a valid one was given.
    pub fn retry(&self) -> Option<u64> {
        self.fields.retry
    }

    /// Whether the block holds at least one comment line.
    pub fn has_comment(&self) -> bool {
        self.fields.comment
    }
}
