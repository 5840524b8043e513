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
//!   streamed out raw, in pieces, as [`Item::Oversize`], without being interpreted;
//! - no copies where none are needed: a chunk pushed as [`Bytes`] ([`Parser::push_bytes`]) is
//!   parsed where it lies, and its complete events are slices of it. Only an event cut by the
//!   chunk's end is copied, into a buffer of its own, until its blank line arrives.
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
    pub fn next_item(&mut self) -> Option<Item> {
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
        let found = memchr::memchr2(b'\n', b'\r', &data[self.scan..]);
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
        Item::Event(Event { raw, fields })
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
        let (name, value) = match memchr::memchr(b':', line) {
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
    fn events_whole_in_a_pushed_chunk_are_slices_of_it() {
        let input = b"data: a\n\nevent: x\ndata: b\r\n\r\n: c\n\ndata: d";
        for cut in 0..input.len() {
            let (first, second) = (Bytes::copy_from_slice(&input[..cut]), &input[cut..]);
            let mut p = Parser::new(1024);
            let mut items = Vec::new();
            for chunk in [first.clone(), Bytes::copy_from_slice(second)] {
                let range = chunk.as_ptr_range();
                p.push_bytes(chunk.clone());
                while let Some(item) = p.next_item() {
                    if let Item::Event(e) = &item {
                        let raw = e.raw().as_ptr_range();
                        let inside = range.start <= raw.start && raw.end <= range.end;
                        let whole = inside || raw.start == raw.end;
                        // An event that began in the first chunk is held; the others are not.
                        let began_here = std::ptr::eq(chunk.as_ptr(), first.as_ptr())
                            || !items.is_empty() && inside;
                        assert!(whole || !began_here || cut == 0, "cut {cut}: copied");
                    }
                    items.push(item);
                }
            }
            p.finish();
            items.extend(std::iter::from_fn(|| p.next_item()));
            assert_eq!(bytes_of(&items), input, "cut {cut}");
            let mut whole = Parser::new(1024);
            whole.push(input);
            whole.finish();
            let expected: Vec<Item> = std::iter::from_fn(|| whole.next_item()).collect();
            assert_eq!(items, expected, "cut {cut}: the same items");
        }
    }

    #[test]
    fn the_bytes_that_may_end_a_held_event() {
        assert_eq!(bytes_to_end_an_event(Some(b'a'), b"bc\n\nrest"), 4);
        assert_eq!(bytes_to_end_an_event(Some(b'\n'), b"\nrest"), 1);
        assert_eq!(bytes_to_end_an_event(Some(b'\n'), b"\r\nrest"), 2);
        assert_eq!(bytes_to_end_an_event(Some(b'\r'), b"\n\r"), 1);
        assert_eq!(bytes_to_end_an_event(None, b"no end"), 6);
    }

    fn events_of(bytes: &[u8]) -> Vec<Item> {
        let mut parser = Parser::new(1 << 20);
        parser.push(bytes);
        std::iter::from_fn(|| parser.next_item()).collect()
    }

    #[test]
    fn an_event_is_written_again_with_other_data() {
        let raw = b"event: x\r\ndata: {\"a\":\r\n: note\r\ndata: 1}\r\nid: 7\r\n\r\n";
        let items = events_of(raw);
        let [Item::Event(event)] = &items[..] else {
            panic!("{items:?}")
        };
        assert_eq!(event.data().as_deref(), Some(&b"{\"a\":\n1}"[..]));
        let mut out = BytesMut::new();
        event.write_with_data(b"{\"a\":\n2}", &mut out);
        assert_eq!(
            &out[..],
            b"event: x\r\ndata: {\"a\":\ndata: 2}\n: note\r\nid: 7\r\n\r\n"
        );
        let again = events_of(&out);
        let [Item::Event(again)] = &again[..] else {
            panic!("{again:?}")
        };
        assert_eq!(again.data().as_deref(), Some(&b"{\"a\":\n2}"[..]));
        assert_eq!(again.id(), Some(&b"7"[..]));
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
