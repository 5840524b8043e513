//! Edits of a forwarded event's bytes: each replaces a range of the event's data (a number's
//! digits, a companion or a hosted item put into a `response.output` list, a mended response
//! id) and everything else goes out as the upstream wrote it.

use std::ops::Range;

use bytes::BytesMut;

use crate::core::sse::Event;

/// What replaces a range of an upstream event's data.
#[derive(Debug)]
pub enum Splice {
    /// A number's new digits (written straight into the output, no allocation).
    Number(u64),
    /// Text spliced in (a companion listed in `response.output`).
    Text(String),
}

/// An edit: the range of the event's data (empty to insert), and what goes there.
pub type Edit = (Range<usize>, Splice);

/// Writes `event`'s raw bytes with `edits` applied: each `(range of the data, splice)` replaces
/// that range (an empty range inserts), in order. If an edited range does not lie contiguous
/// in the raw event (a number split across `data:` lines), the event's data is edited whole
/// and written again.
pub fn write(event: &Event, edits: &[Edit], out: &mut BytesMut) {
    let raw = event.raw();
    let mut from = 0;
    let start_len = out.len();
    for (range, text) in edits {
        let start = event.raw_offset_of_data(range.start);
        let end = match range.end.checked_sub(1).filter(|_| !range.is_empty()) {
            Some(last) => event.raw_offset_of_data(last).map(|l| l + 1),
            None => start,
        };
        match (start, end) {
            (Some(start), Some(end)) if end - start == range.len() && start >= from => {
                out.extend_from_slice(&raw[from..start]);
                put(text, out);
                from = end;
            }
            // A range across two `data` lines: the event is written again, its data edited
            // whole (the client reads the same data, but for the edits).
            _ => {
                out.truncate(start_len);
                return write_joined(event, edits, out);
            }
        }
    }
    out.extend_from_slice(&raw[from..]);
}

/// [`write()`] on the event's joined data, written back as `data` lines; the event as it is
/// when an edit does not fit the data.
fn write_joined(event: &Event, edits: &[Edit], out: &mut BytesMut) {
    let Some(data) = event.data() else {
        return out.extend_from_slice(event.raw());
    };
    let mut edited = BytesMut::with_capacity(data.len() + 64);
    let mut from = 0;
    for (range, text) in edits {
        if range.start < from || range.end > data.len() {
            return out.extend_from_slice(event.raw());
        }
        edited.extend_from_slice(&data[from..range.start]);
        put(text, &mut edited);
        from = range.end;
    }
    edited.extend_from_slice(&data[from..]);
    event.write_with_data(&edited, out);
}

fn put(splice: &Splice, out: &mut BytesMut) {
    match splice {
        Splice::Number(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Splice::Text(text) => out.extend_from_slice(text.as_bytes()),
    }
}
