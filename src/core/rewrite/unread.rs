//! The last numbered event forwarded unread. Events are forwarded without being parsed while
//! nothing needs their numbers; when an unnumbered event then opens a call, its injected events
//! take "the number after the last one", so the last numbered event is kept (cheaply) to be
//! read only then.

use std::ops::Range;

use bytes::Bytes;

use super::output::Output;
use crate::core::dialect::responses;

/// The largest event data copied; a larger one is read for its number at once instead (rare,
/// and cheaper than keeping its copy for the stream's life).
pub(super) const MAX_UNREAD_COPY: usize = 4096;

#[derive(Debug, Default)]
pub struct Unread {
    /// The data of the last event with a `sequence_number` forwarded unread since numbers were
    /// last followed (empty if none); events without one leave it as it is, so a stream that
    /// numbers only some events still knows its last number.
    last: Vec<u8>,
    /// Where that event's data lies in the chunk being fed instead, when it is a slice of it
    /// (no copy; copied when the chunk is done).
    in_origin: Option<Range<usize>>,
    /// The number of that event instead, when it was too large to copy.
    number: Option<u64>,
}

impl Unread {
    /// Event data with a `sequence_number` went out unread (`responses::Skip::numbered`: events
    /// without one are not held). Data that lies in the fed chunk is held where it is.
    /// Otherwise a copy into a reused buffer: holding the event would keep the parser's buffer
    /// of held bytes shared, and every later read into it would reallocate it.
    pub fn hold(&mut self, data: &[u8], output: &Output) {
        self.forget();
        match output.offset_in_origin(data) {
            Some(start) => self.in_origin = Some(start..start + data.len()),
            None => self.copy(data),
        }
    }

    /// The chunk is done: copies the held data out of it, so that nothing holds the chunk (and
    /// the upstream reader's buffer behind it) once it has gone out: one copy per chunk.
    pub fn keep(&mut self, origin: &Bytes) {
        if let Some(range) = self.in_origin.take() {
            self.copy(&origin[range]);
        }
    }

    /// Numbers are followed again: nothing to keep.
    pub fn forget(&mut self) {
        self.last.clear();
        self.in_origin = None;
        self.number = None;
    }

    /// The number of the event held (read now), and forgets it.
    pub fn take_number(&mut self, origin: &Bytes) -> Option<u64> {
        let last = match &self.in_origin {
            Some(range) => &origin[range.clone()],
            None => &self.last[..],
        };
        let read = responses::read(last)
            .ok()
            .and_then(|reading| reading.sequence_number.map(|n| n.value));
        let number = read.or(self.number);
        self.forget();
        number
    }

    fn copy(&mut self, data: &[u8]) {
        if data.len() <= MAX_UNREAD_COPY {
            self.last.extend_from_slice(data);
        } else if let Ok(reading) = responses::read(data) {
            self.number = reading.sequence_number.map(|n| n.value);
        }
    }
}
