//! Incremental, byte-faithful parser for `text/event-stream` (WHATWG HTML §9.2.6).
//!
//! Bytes go in with [`Parser::push`]; complete events come out of [`Parser::next_item`]. Each
//! `Event` owns the exact bytes it was parsed from (`raw`), so a proxy forwards an event it need
//! not change as a copy of its input. Invariants:
//! - every pushed byte comes out exactly once, in order, in some [`Item`];
//! - items do not depend on how the input was split: a CR at the end of the buffered bytes is
//!   held until the next byte says whether it starts a CRLF;
//! - each byte is scanned for line endings once (`scan` remembers how far we got), so a long line
//!   fed in many chunks costs O(n), not O(n²);
//! - memory is bounded by `max_event_bytes` (plus one pushed chunk): an event longer than that is
//!   streamed out raw, in pieces, as `Item::Oversize`, without being interpreted;
//! - no copies where none are needed: a chunk pushed as [`Bytes`] ([`Parser::push_bytes`]) is
//!   parsed where it lies, and its complete events are slices of it. Only an event cut by the
//!   chunk's end is copied, into a buffer of its own, until its blank line arrives.
//!
//! Why hand-written: the SSE crates decode into owned strings, drop comments and raw bytes, end
//! the stream on invalid UTF-8 and have no size limit; a byte-faithful proxy needs all four.

use bytes::{Bytes, BytesMut};

use super::event::{Event, Fields, Item};

mod simple;

const BOM: &[u8] = b"\xEF\xBB\xBF";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Buffering the current event until its blank line.
    Buffering,
    /// The current event is over the limit: its bytes are handed out as they are scanned.
    /// `line_has_bytes` says whether the current line began in bytes already handed out.
    Oversize { line_has_bytes: bool },
}

/// The incremental parser. See the module docs for its invariants.
#[derive(Debug)]
pub struct Parser {
    /// Bytes of the current event not yet handed out, when they had to be held (copied) across
    /// chunks; index 0 is where the event (or the part of an oversize event not yet handed out)
    /// starts. Parsed when `in_chunk` is false.
    buf: BytesMut,
    /// The pushed chunk's bytes not handed out yet, parsed in place when `in_chunk` is true
    /// (then `buf` is empty, and index 0 is where the current event starts).
    chunk: Bytes,
    in_chunk: bool,
    /// Pushed bytes not yet given to `buf` or `chunk`: they wait until `buf`'s event is
    /// complete, so that the rest of a chunk is parsed in place.
    pending: Bytes,
    /// How far `buf` has been scanned for line endings.
    scan: usize,
    /// Where the current line starts in `buf`.
    line_start: usize,
    fields: Fields,
    mode: Mode,
    /// True until the first line has been seen, so a leading UTF-8 BOM can be skipped.
    at_stream_start: bool,
    eof: bool,
    max_event_bytes: usize,
}

impl Parser {
    pub fn new(max_event_bytes: usize) -> Self {
        Parser {
            buf: BytesMut::new(),
            chunk: Bytes::new(),
            in_chunk: false,
            pending: Bytes::new(),
            scan: 0,
            line_start: 0,
            fields: Fields::default(),
            mode: Mode::Buffering,
            at_stream_start: true,
            eof: false,
            max_event_bytes,
        }
    }

    /// Appends bytes to parse (a copy). Call [`Parser::next_item`] until it returns `None`
    /// afterwards.
    pub fn push(&mut self, chunk: &[u8]) {
        self.push_bytes(Bytes::copy_from_slice(chunk));
    }

    /// Appends a chunk to parse, without copying it where its events lie whole in it. Call
    /// [`Parser::next_item`] until it returns `None` before the next push.
    pub fn push_bytes(&mut self, chunk: Bytes) {
        debug_assert!(!self.eof, "push after finish");
        debug_assert!(
            self.pending.is_empty(),
            "push before the last chunk was parsed"
        );
        if self.pending.is_empty() {
            self.pending = chunk;
        } else {
            // Not drained: keep every byte anyway, in order.
            let mut both = BytesMut::from(&self.pending[..]);
            both.extend_from_slice(&chunk);
            self.pending = both.freeze();
        }
    }

    /// Marks the end of input: a held CR now ends its line, and the unterminated rest comes out
    /// as [`Item::Incomplete`] (or [`Item::Oversize`]) from the following `next_item` calls.
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// Bytes held back, waiting for the rest of their event (or to be parsed).
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len() + self.chunk.len() + self.pending.len()
    }

    /// The bytes being parsed now.
    fn data(&self) -> &[u8] {
        if self.in_chunk {
            &self.chunk
        } else {
            &self.buf
        }
    }

    /// Whether no input will follow what is being parsed now.
    fn at_eof(&self) -> bool {
        self.eof && self.pending.is_empty()
    }

    /// Whether bytes of an unfinished event have already been handed out (as oversize pieces):
    /// anything written to the client now would land inside that event.
    pub fn is_mid_event_output(&self) -> bool {
        // Entering oversize mode hands out the event's first bytes at once.
        matches!(self.mode, Mode::Oversize { .. })
    }

    /// The next complete item, or `None` when more input is needed.
    ///
    /// Inlined into the caller's loop, so that its last call for a chunk parsed to its end
    /// (each chunk of a paced stream is) costs a test, not a call.
    #[inline]
    pub fn next_item(&mut self) -> Option<Item> {
        if self.in_chunk && self.chunk.is_empty() {
            // Nothing of the chunk to hold.
            self.in_chunk = false;
            if self.pending.is_empty() {
                return None;
            }
        }
        self.parse_item()
    }

    #[inline(never)]
    fn parse_item(&mut self) -> Option<Item> {
        self.simple_item().or_else(|| self.general_item())
    }

    /// [`Parser::next_item`] line by line, for any input.
    fn general_item(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.next_item_here() {
                return Some(item);
            }
            if self.in_chunk {
                // The chunk ends inside an event: hold its start (the one copy of
                // pass-through bytes) until the rest comes.
                self.buf.extend_from_slice(&self.chunk);
                self.chunk = Bytes::new();
                self.in_chunk = false;
            }
            if self.pending.is_empty() {
                return None;
            }
            if self.buf.is_empty() {
                self.chunk = std::mem::take(&mut self.pending);
                self.in_chunk = true;
            } else {
                // Only as much as may end the held event; the rest is parsed in place.
                let n = bytes_to_end_an_event(self.buf.last().copied(), &self.pending);
                let head = self.pending.split_to(n);
                self.buf.extend_from_slice(&head);
            }
        }
    }

    /// [`Parser::next_item`] within the bytes being parsed now.
    fn next_item_here(&mut self) -> Option<Item> {
        while let Some((line_end, next)) = self.next_line() {
            let line_start = std::mem::replace(&mut self.line_start, next);
            self.scan = next;
            match self.mode {
                Mode::Buffering => {
                    if self.on_line(line_start, line_end) {
                        return Some(self.dispatch(next));
                    }
                }
                Mode::Oversize { line_has_bytes } => {
                    if line_start == line_end && !line_has_bytes {
                        self.mode = Mode::Buffering;
                        return Some(Item::Oversize(self.take(next)));
                    }
                    self.mode = Mode::Oversize {
                        line_has_bytes: false,
                    };
                }
            }
        }
        self.after_scan()
    }

    /// Finds the next line ending at or after `scan`: `(end of line, start of next line)`.
    fn next_line(&mut self) -> Option<(usize, usize)> {
        let eof = self.at_eof();
        let data = self.data();
        let rest = &data[self.scan..];
        // The blank line that ends each event, without a search; nor a search of nothing (each
        // chunk ends so, and every event of a paced stream is a chunk).
        let found = match rest.first() {
            Some(b'\n' | b'\r') => Some(0),
            Some(_) => memchr::memchr2(b'\n', b'\r', rest),
            None => None,
        };
        let Some(i) = found else {
            self.scan = data.len();
            return None;
        };
        let p = self.scan + i;
        if data[p] == b'\n' {
            return Some((p, p + 1));
        }
        match data.get(p + 1) {
            Some(b'\n') => Some((p, p + 2)),
            Some(_) => Some((p, p + 1)),
            None if eof => Some((p, p + 1)),
            None => {
                // A CR as the last byte: hold it until we know whether an LF follows.
                self.scan = p;
                None
            }
        }
    }

    /// Called when no further line ending is in `buf`: streams out oversize bytes, and at EOF
    /// hands out whatever is left.
    fn after_scan(&mut self) -> Option<Item> {
        match self.mode {
            Mode::Buffering if self.scan > self.max_event_bytes => {
                // The event is already longer than the limit: stop buffering it.
                self.fields = Fields::default();
                self.at_stream_start = false;
                self.mode = Mode::Oversize {
                    line_has_bytes: self.line_start < self.scan,
                };
                Some(Item::Oversize(self.take(self.scan)))
            }
            Mode::Oversize { line_has_bytes } if self.scan > 0 => {
                self.mode = Mode::Oversize {
                    line_has_bytes: line_has_bytes || self.line_start < self.scan,
                };
                Some(Item::Oversize(self.take(self.scan)))
            }
            _ if self.at_eof() && !self.data().is_empty() => {
                let rest = self.take(self.data().len());
                Some(match self.mode {
                    Mode::Buffering => Item::Incomplete(rest),
                    Mode::Oversize { .. } => Item::Oversize(rest),
                })
            }
            _ => None,
        }
    }

    /// Splits off the first `n` buffered bytes; positions are rebased onto what remains.
    fn take(&mut self, n: usize) -> Bytes {
        self.scan -= n.min(self.scan);
        self.line_start -= n.min(self.line_start);
        if self.in_chunk {
            self.chunk.split_to(n)
        } else {
            self.buf.split_to(n).freeze()
        }
    }

    fn dispatch(&mut self, end: usize) -> Item {
        let fields = std::mem::take(&mut self.fields);
        let raw = self.take(end);
        if raw.len() > self.max_event_bytes {
            // Same verdict as when the event arrives in pieces and trips the limit midway.
            return Item::Oversize(raw);
        }
        Item::Event(Event::new(raw, fields))
    }

    /// Interprets one complete line; returns true when it is the blank line ending the event.
    fn on_line(&mut self, mut start: usize, end: usize) -> bool {
        let data: &[u8] = if self.in_chunk {
            &self.chunk
        } else {
            &self.buf
        };
        if std::mem::take(&mut self.at_stream_start) && data[start..end].starts_with(BOM) {
            start += BOM.len();
        }
        if start == end {
            return true;
        }
        let line = &data[start..end];
        if line[0] == b':' {
            self.fields.comment = true;
            return false;
        }
        let (name, value) = match colon(line) {
            Some(colon) => {
                let mut value = start + colon + 1;
                if data.get(value) == Some(&b' ') && value < end {
                    value += 1;
                }
                (&line[..colon], value..end)
            }
            None => (line, end..end),
        };
        let fields = &mut self.fields;
        match name {
            b"event" => fields.event = Some(value),
            b"data" if fields.data.is_none() => fields.data = Some(value),
            b"data" => fields.more_data.push(value),
            b"id" if !data[value.clone()].contains(&0) => fields.id = Some(value),
            b"retry" => {
                let digits = &data[value];
                if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                    // Too many digits to fit is treated like any other invalid value: ignored.
                    fields.retry = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .or(fields.retry);
                }
            }
            _ => {}
        }
        false
    }
}

/// Where the first `:` of a line is. Field names are short (`data`, `event`): their colon is
/// looked for byte by byte first, the rest of a longer line with memchr.
fn colon(line: &[u8]) -> Option<usize> {
    const NEAR: usize = 8;
    let near = &line[..line.len().min(NEAR)];
    match near.iter().position(|&b| b == b':') {
        Some(i) => Some(i),
        None if line.len() > NEAR => memchr::memchr(b':', &line[NEAR..]).map(|i| i + NEAR),
        None => None,
    }
}

/// How many bytes of `next` to append to a held event so that it may end there: through the
/// first line ending that follows another (`prev` is the held bytes' last), and the byte after
/// a CR (which says whether it is a CRLF); all of `next` when no blank line can end in it. Any
/// length would do (the parser does not depend on the split); this one lets the rest of the
/// chunk be parsed in place.
fn bytes_to_end_an_event(prev: Option<u8>, next: &[u8]) -> usize {
    let is_eol = |b: u8| b == b'\n' || b == b'\r';
    let mut from = 0;
    // From line ending to line ending (memchr), not byte by byte: a long event held across
    // many chunks is scanned at memchr's speed.
    while let Some(i) = memchr::memchr2(b'\n', b'\r', &next[from..]) {
        let p = from + i;
        let before = if p == 0 { prev } else { Some(next[p - 1]) };
        if before.is_some_and(is_eol) {
            let end = if next[p] == b'\r' { p + 2 } else { p + 1 };
            return end.min(next.len());
        }
        from = p + 1;
    }
    next.len()
}

#[cfg(test)]
mod tests;
