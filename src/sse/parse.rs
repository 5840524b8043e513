//! Incremental, byte-faithful parser for `text/event-stream` (WHATWG HTML §9.2.6).
//!
//! Bytes go in with [`Parser::push`]; complete events come out of [`Parser::next_item`]. Each
//! [`Event`] owns the exact bytes it was parsed from (`raw`), so a proxy forwards an event it need
//! not change as a copy of its input. Invariants:
//! - every pushed byte comes out exactly once, in order, in some [`Item`];
//! - items do not depend on how the input was split: a CR at the end of the buffered bytes is
//!   held until the next byte says whether it starts a CRLF;
//! - each byte is scanned for line endings once (`scan` remembers how far we got), so a long line
//!   fed in many chunks costs O(n), not O(n²);
//! - memory is bounded by `max_event_bytes` (plus one pushed chunk): an event longer than that is
//!   streamed out raw, in pieces, as [`Item::Oversize`], without being interpreted.
//!
//! Why hand-written: the SSE crates decode into owned strings, drop comments and raw bytes, end
//! the stream on invalid UTF-8 and have no size limit; a byte-faithful proxy needs all four.

use std::borrow::Cow;
use std::ops::Range;

use bytes::{Bytes, BytesMut};

const BOM: &[u8] = b"\xEF\xBB\xBF";

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

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Fields {
    event: Option<Range<usize>>,
    /// The first `data` line's value; `more_data` holds the rest (rare), so the usual
    /// single-line event allocates nothing.
    data: Option<Range<usize>>,
    more_data: Vec<Range<usize>>,
    id: Option<Range<usize>>,
    retry: Option<u64>,
    comment: bool,
}

impl Event {
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
    /// Bytes of the current event not yet handed out; index 0 is where the event (or the part
    /// of an oversize event not yet handed out) starts.
    buf: BytesMut,
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
            scan: 0,
            line_start: 0,
            fields: Fields::default(),
            mode: Mode::Buffering,
            at_stream_start: true,
            eof: false,
            max_event_bytes,
        }
    }

    /// Appends bytes to parse. Call [`Parser::next_item`] until it returns `None` afterwards.
    pub fn push(&mut self, chunk: &[u8]) {
        debug_assert!(!self.eof, "push after finish");
        self.buf.extend_from_slice(chunk);
    }

    /// Marks the end of input: a held CR now ends its line, and the unterminated rest comes out
    /// as [`Item::Incomplete`] (or [`Item::Oversize`]) from the following `next_item` calls.
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// Bytes held back, waiting for the rest of their event.
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Whether bytes of an unfinished event have already been handed out (as oversize pieces):
    /// anything written to the client now would land inside that event.
    pub fn is_mid_event_output(&self) -> bool {
        // Entering oversize mode hands out the event's first bytes at once.
        matches!(self.mode, Mode::Oversize { .. })
    }

    /// The next complete item, or `None` when more input is needed.
    pub fn next_item(&mut self) -> Option<Item> {
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
        let found = memchr::memchr2(b'\n', b'\r', &self.buf[self.scan..]);
        let Some(i) = found else {
            self.scan = self.buf.len();
            return None;
        };
        let p = self.scan + i;
        if self.buf[p] == b'\n' {
            return Some((p, p + 1));
        }
        match self.buf.get(p + 1) {
            Some(b'\n') => Some((p, p + 2)),
            Some(_) => Some((p, p + 1)),
            None if self.eof => Some((p, p + 1)),
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
            _ if self.eof && !self.buf.is_empty() => {
                let rest = self.take(self.buf.len());
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
        self.buf.split_to(n).freeze()
    }

    fn dispatch(&mut self, end: usize) -> Item {
        let fields = std::mem::take(&mut self.fields);
        let raw = self.take(end);
        if raw.len() > self.max_event_bytes {
            // Same verdict as when the event arrives in pieces and trips the limit midway.
            return Item::Oversize(raw);
        }
        Item::Event(Event { raw, fields })
    }

    /// Interprets one complete line; returns true when it is the blank line ending the event.
    fn on_line(&mut self, mut start: usize, end: usize) -> bool {
        if std::mem::take(&mut self.at_stream_start) && self.buf[start..end].starts_with(BOM) {
            start += BOM.len();
        }
        if start == end {
            return true;
        }
        let line = &self.buf[start..end];
        if line[0] == b':' {
            self.fields.comment = true;
            return false;
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let mut value = start + colon + 1;
                if self.buf.get(value) == Some(&b' ') && value < end {
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
            b"id" if !self.buf[value.clone()].contains(&0) => fields.id = Some(value),
            b"retry" => {
                let digits = &self.buf[value];
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

#[cfg(test)]
mod tests {
    use super::*;

    fn items(input: &[u8], max: usize) -> Vec<Item> {
        let mut p = Parser::new(max);
        p.push(input);
        p.finish();
        std::iter::from_fn(|| p.next_item()).collect()
    }

    fn events(input: &[u8]) -> Vec<Event> {
        items(input, 1 << 20)
            .into_iter()
            .filter_map(|i| match i {
                Item::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    fn bytes_of(items: &[Item]) -> Vec<u8> {
        let mut out = Vec::new();
        for item in items {
            match item {
                Item::Event(e) => out.extend_from_slice(e.raw()),
                Item::Oversize(b) | Item::Incomplete(b) => out.extend_from_slice(b),
            }
        }
        out
    }

    #[test]
    fn fields_and_raw_bytes() {
        let input = b"event: a\ndata: {\"x\":1}\nid: 7\nretry: 30\n\n: ping\n\n";
        let evs = events(input);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].event_type(), Some(&b"a"[..]));
        assert_eq!(evs[0].data().as_deref(), Some(&b"{\"x\":1}"[..]));
        assert_eq!(evs[0].id(), Some(&b"7"[..]));
        assert_eq!(evs[0].retry(), Some(30));
        assert_eq!(&evs[0].raw()[..], &input[..40]);
        assert!(evs[1].has_comment());
        assert_eq!(evs[1].data(), None);
    }

    #[test]
    fn line_endings_lf_cr_crlf_mixed() {
        for input in [
            &b"data: a\r\ndata: b\r\n\r\n"[..],
            b"data: a\rdata: b\r\r",
            b"data: a\ndata: b\r\n\n",
        ] {
            let evs = events(input);
            assert_eq!(evs.len(), 1, "{input:?}");
            assert_eq!(evs[0].data().as_deref(), Some(&b"a\nb"[..]));
            assert_eq!(&evs[0].raw()[..], input);
        }
    }

    #[test]
    fn cr_at_chunk_end_is_held_until_next_byte() {
        let mut p = Parser::new(1024);
        p.push(b"data: a\n\r");
        assert_eq!(p.next_item(), None, "the CR may start a CRLF");
        p.push(b"\ndata: b\n\n");
        let Some(Item::Event(e)) = p.next_item() else {
            panic!("expected an event")
        };
        assert_eq!(&e.raw()[..], b"data: a\n\r\n");
    }

    #[test]
    fn colon_space_and_fieldless_lines() {
        let evs = events(b"data:a\ndata:  b\ndata\nevent\n\n");
        assert_eq!(evs[0].data().as_deref(), Some(&b"a\n b\n"[..]));
        assert_eq!(evs[0].event_type(), Some(&b""[..]));
    }

    #[test]
    fn bom_only_at_stream_start() {
        let evs = events(b"\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\n");
        assert_eq!(evs[0].data().as_deref(), Some(&b"x"[..]));
        assert_eq!(evs[1].data(), None, "a later BOM is part of a field name");
    }

    #[test]
    fn id_with_nul_ignored_and_bad_retry_ignored() {
        let evs = events(b"id: 1\nid: a\0b\nretry: 1x\ndata: d\n\n");
        assert_eq!(evs[0].id(), Some(&b"1"[..]));
        assert_eq!(evs[0].retry(), None);
    }

    #[test]
    fn invalid_utf8_is_kept_as_bytes() {
        let evs = events(b"data: \xff\xfe\n\n");
        assert_eq!(evs[0].data().as_deref(), Some(&b"\xff\xfe"[..]));
    }

    #[test]
    fn incomplete_tail_at_eof() {
        let it = items(b"data: a\n\ndata: b", 1024);
        assert!(matches!(&it[1], Item::Incomplete(b) if &b[..] == b"data: b"));
    }

    #[test]
    fn oversize_event_streams_raw_and_parsing_resumes() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        let input = format!("data: a\n\n{big}data: b\n\n");
        for chunk in [1, 7, 64, input.len()] {
            let mut p = Parser::new(50);
            let mut out = Vec::new();
            for c in input.as_bytes().chunks(chunk) {
                p.push(c);
                out.extend(std::iter::from_fn(|| p.next_item()));
                assert!(p.buffered_bytes() <= 50 + chunk, "memory stays bounded");
            }
            p.finish();
            out.extend(std::iter::from_fn(|| p.next_item()));
            assert_eq!(bytes_of(&out), input.as_bytes());
            let datas: Vec<_> = out
                .iter()
                .filter_map(|i| match i {
                    Item::Event(e) => e.data().map(|d| d.into_owned()),
                    _ => None,
                })
                .collect();
            assert_eq!(datas, vec![b"a".to_vec(), b"b".to_vec()], "chunk {chunk}");
        }
    }

    #[test]
    fn never_ending_line_is_bounded() {
        let mut p = Parser::new(1000);
        let mut out = 0;
        for _ in 0..1000 {
            p.push(&[b'x'; 100]);
            while let Some(Item::Oversize(b)) = p.next_item() {
                out += b.len();
            }
            assert!(p.buffered_bytes() <= 1100);
        }
        assert_eq!(out + p.buffered_bytes(), 100_000);
    }

    #[test]
    fn raw_offset_of_data_maps_multiline() {
        let e = &events(b"data: ab\ndata: cd\n\n")[0];
        assert_eq!(e.raw_offset_of_data(0), Some(6));
        assert_eq!(e.raw_offset_of_data(2), None, "the joining newline");
        assert_eq!(e.raw_offset_of_data(3), Some(15));
        assert_eq!(e.raw_offset_of_data(5), None);
    }
}
