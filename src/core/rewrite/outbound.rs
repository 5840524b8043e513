//! What goes to the client: the output pieces (zero-copy where nothing changes), the gate of
//! stream resumption, the last numbered event that went out unread (for the number after it),
//! and when output last went out (for heartbeats).

use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::output::Output;
use super::unread::Unread;
use crate::core::dialect::responses::Skip;

#[derive(Debug, Default)]
pub struct Outbound {
    pieces: Output,
    unread: Unread,
    /// Stream resumption: output is dropped until an event numbered above this has gone out.
    resume_after: Option<u64>,
    /// When output last went out.
    last: Option<Instant>,
}

impl Outbound {
    /// Resumes for a client that has seen every event numbered up to `n`.
    pub fn resume_after(&mut self, n: u64) {
        self.resume_after = Some(n);
    }

    /// Whether the stream is being resumed (output is dropped until the client's next event).
    pub fn is_resuming(&self) -> bool {
        self.resume_after.is_some()
    }

    /// Whether an event numbered `number` goes out, given stream resumption.
    pub fn passes(&mut self, number: Option<u64>) -> bool {
        match (self.resume_after, number) {
            (None, _) => true,
            (Some(n), Some(m)) if m > n => {
                self.resume_after = None;
                true
            }
            (Some(_), _) => false,
        }
    }

    /// A chunk is being fed: unchanged bytes that lie in it go out as slices of it.
    pub fn begin_chunk(&mut self, chunk: Bytes) {
        self.pieces.begin_chunk(chunk);
    }

    /// The chunk is done: its output appended to `pieces` (`now` is when it goes out), and
    /// nothing holds it any more.
    pub fn end_chunk(&mut self, now: Instant, pieces: &mut impl Extend<Bytes>) {
        self.unread.keep(self.pieces.origin());
        self.take_into(now, pieces);
        self.pieces.end_chunk();
    }

    /// Upstream bytes going out unchanged.
    pub fn raw(&mut self, bytes: &Bytes) {
        self.pieces.raw(bytes);
    }

    /// Upstream bytes going out unchanged, outside the numbering, unless resumption drops them.
    pub fn unnumbered(&mut self, bytes: &Bytes) {
        if self.passes(None) {
            self.pieces.raw(bytes);
        }
    }

    /// An upstream event going out unread (never while resuming), its data held should an
    /// injection need the number after it.
    pub fn unread(&mut self, raw: &Bytes, data: &[u8], skip: Skip) {
        self.pieces.raw(raw);
        if skip.numbered {
            self.unread.hold(data, &self.pieces);
        }
    }

    /// Numbers are followed again: the event held unread is not needed.
    pub fn forget_unread(&mut self) {
        self.unread.forget();
    }

    /// The number of the last numbered event that went out unread (read now), if any.
    pub fn take_unread_number(&mut self) -> Option<u64> {
        self.unread.take_number(self.pieces.origin())
    }

    /// Where toolpulse writes: after the unchanged bytes so far.
    pub fn text(&mut self) -> &mut BytesMut {
        self.pieces.text()
    }

    /// The output so far, in order; `now` is when it goes out.
    pub fn take(&mut self, now: Instant) -> Vec<Bytes> {
        let mut pieces = Vec::new();
        self.take_into(now, &mut pieces);
        pieces
    }

    /// [`Outbound::take`], appended to `pieces`.
    fn take_into(&mut self, now: Instant, pieces: &mut impl Extend<Bytes>) {
        if self.pieces.take_into(pieces) {
            self.last = Some(now);
        }
    }

    /// When output last went out.
    pub fn last(&self) -> Option<Instant> {
        self.last
    }
}
