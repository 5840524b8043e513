//! The parser's fast path: a whole event of the usual shape at the start of a chunk (`event`
//! and `data` lines ending in LF, then a blank line), its fields read in one pass with one
//! cheap search per line. A paced stream sends one such event per read, and the general path's
//! bookkeeping (a line at a time, a held CR, oversize pieces) cost more than the event's
//! forwarding. Anything else is left to the general path, which gives the same items.

use super::{Event, Fields, Item, Mode, Parser};

impl Parser {
    /// An event of the usual shape that starts the bytes to parse, read by the fast path
    /// ([`simple_event`]); `None` leaves everything to [`Parser::general_item`].
    #[inline]
    pub(super) fn simple_item(&mut self) -> Option<Item> {
        if !self.in_chunk {
            if !self.buf.is_empty() || self.pending.is_empty() {
                return None;
            }
            // As the general path would: the chunk is parsed where it lies.
            self.chunk = std::mem::take(&mut self.pending);
            self.in_chunk = true;
        }
        // Between events (nothing of the next one scanned yet), past a possible BOM.
        if self.scan != 0 || self.mode != Mode::Buffering || self.at_stream_start {
            return None;
        }
        debug_assert!(self.line_start == 0 && self.fields == Fields::default());
        let (fields, end) = simple_event(&self.chunk)?;
        if end > self.max_event_bytes {
            return None;
        }
        Some(Item::Event(Event::new(self.chunk.split_to(end), fields)))
    }
}

/// The event at the start of `bytes` and its length (through its blank line), when it is
/// whole and simple: only `event` and `data` lines (one `data` line at most), each ending in
/// an LF ([`line_feed`]). `None` leaves `bytes` to the general path: another field, a
/// comment, a second `data` line, a CR, a tab, or no blank line yet.
fn simple_event(bytes: &[u8]) -> Option<(Fields, usize)> {
    let mut fields = Fields::default();
    let mut start = 0;
    loop {
        let rest = &bytes[start..];
        if *rest.first()? == b'\n' {
            return Some((fields, start + 1));
        }
        let end = start + line_feed(rest)?;
        let (name_len, field) = if rest.starts_with(b"data:") && fields.data.is_none() {
            (4, &mut fields.data)
        } else if rest.starts_with(b"event:") {
            (5, &mut fields.event)
        } else {
            return None;
        };
        let mut value = start + name_len + 1;
        if value < end && bytes[value] == b' ' {
            value += 1;
        }
        *field = Some(value..end);
        start = end + 1;
    }
}

/// Where the first LF of `bytes` is, when no CR comes before it. The first [`NEAR`] bytes are
/// looked at eight at a time (the bit trick of "Bit Twiddling Hacks" that `dialect::scan` uses
/// too), where memchr2 would first set up its vectors for a short line (an `event` line is
/// ~35 bytes); there any byte below 0x0E (a tab, a NUL) before the LF also gives `None`, and the
/// general path takes the line. The rest of a longer line (a `data` line) is memchr2's.
fn line_feed(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // The lowest byte flagged is always below 0x0E; later ones may not be, and are not looked at.
    let below_0e = |word: u64| word.wrapping_sub(ONES * 0x0E) & !word & HIGH;
    let near = &bytes[..bytes.len().min(NEAR)];
    let mut at = 0;
    let mut words = near.chunks_exact(8);
    for chunk in &mut words {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let flagged = below_0e(word);
        if flagged != 0 {
            let i = at + (flagged.trailing_zeros() / 8) as usize;
            return (bytes[i] == b'\n').then_some(i);
        }
        at += 8;
    }
    let i = match words.remainder().iter().position(|&b| b < 0x0E) {
        Some(i) => at + i,
        None => NEAR + memchr::memchr2(b'\n', b'\r', bytes.get(NEAR..)?)?,
    };
    (bytes[i] == b'\n').then_some(i)
}

/// How far [`line_feed`] looks a word at a time: an `event` line of the Responses API whole.
const NEAR: usize = 40;

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::{Event, Item, Parser};
    use super::*;

    #[test]
    fn a_line_ends_at_its_first_lf_unless_another_control_byte_comes_first() {
        for len in 0..2 * NEAR {
            let mut line = vec![b'x'; len];
            line.extend_from_slice(b"\nmore\n");
            assert_eq!(line_feed(&line), Some(len), "LF after {len} bytes");
            line[len] = b'\r';
            assert_eq!(line_feed(&line), None, "CR after {len} bytes");
            for odd in [b'\t', 0, 0x0B, 0x0C] {
                line[len] = odd;
                let beyond = (len >= NEAR).then_some(len + 5);
                assert_eq!(line_feed(&line), beyond, "{odd:#x} after {len} bytes");
            }
            assert_eq!(line_feed(&vec![b'x'; len]), None, "no LF in {len} bytes");
        }
        // Bytes at and above 0x0E (and high bytes, whose borrow must not hide the LF) are text.
        let mut line = b"\x0e\x7f\x80\xff\xfe\x0f\x10\x20\x0e\x81".to_vec();
        line.push(b'\n');
        assert_eq!(line_feed(&line), Some(10));
    }

    #[test]
    fn a_simple_event_is_read_as_the_general_path_reads_it() {
        let cases: [&[u8]; 6] = [
            b"event: a\ndata: {\"x\":1}\n\nrest",
            b"data:x\n\n",
            b"data:\nevent:\n\n",
            b"event: a\nevent:  b\n\n",
            b"\n",
            b"data: \xff\n\n",
        ];
        for input in cases {
            let (fields, end) = simple_event(input).expect("simple");
            let mut parser = Parser::new(1 << 20);
            parser.push(input);
            parser.at_stream_start = false;
            let general = parser.general_item();
            let fast = Event::new(Bytes::copy_from_slice(&input[..end]), fields);
            assert_eq!(general, Some(Item::Event(fast)), "{input:?}");
        }
    }

    #[test]
    fn anything_else_is_left_to_the_general_path() {
        let cases: [&[u8]; 12] = [
            b"",
            b"data: x\n",
            b"data: x\ndata: y\n\n",
            b"data: x\r\n\r\n",
            b"data: x\n\r\n",
            b"data: x\rdata: y\n\n",
            b"data: \tx\n\n",
            b": comment\n\n",
            b"id: 1\n\n",
            b"retry: 5\n\n",
            b"data\n\n",
            b"\xEF\xBB\xBFdata: x\n\n",
        ];
        for input in cases {
            assert_eq!(simple_event(input), None, "{input:?}");
        }
    }
}
