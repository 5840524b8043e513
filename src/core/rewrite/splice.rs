//! Edits of a forwarded event's bytes: each replaces a range of the event's data (a number's
//! digits, a companion or a hosted item put into a `response.output` list, a mended response
//! id) and everything else goes out as the upstream wrote it.

use std::ops::Range;

use bytes::BytesMut;

use crate::core::dialect::responses::Number;
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
    if !write_in_place(event, edits, out) {
        write_spliced(event, edits, out);
    }
}

/// The edit of a number that changed: the digits of `old`, where they lie, now read `new`.
pub fn number(old: Option<Number>, new: Option<u64>) -> Option<Edit> {
    match (old, new) {
        (Some(old), Some(new)) if new != old.value => Some((old.span, Splice::Number(new))),
        _ => None,
    }
}

/// [`write()`] with the edits of an event whose numbers alone change ([`number`]), given
/// apart rather than in a list, in the order they lie.
pub fn write_numbers(event: &Event, edits: [Option<Edit>; 2], out: &mut BytesMut) {
    match edits {
        [Some(a), Some(b)] if b.0.start < a.0.start => write(event, &[b, a], out),
        [Some(a), Some(b)] => write(event, &[a, b], out),
        [Some(a), None] | [None, Some(a)] => write(event, &[a], out),
        [None, None] => write(event, &[], out),
    }
}

/// [`write()`] for the usual edits of a renumbered event: numbers whose new digits are as many
/// as the old ones, in an event of one `data` line. The event is copied whole and the digits
/// are written over their old ones: one copy, where splicing made one per piece and one per
/// number. Returns `false`, having written nothing, for any other edits.
fn write_in_place(event: &Event, edits: &[Edit], out: &mut BytesMut) -> bool {
    let Some(data) = event.data_range() else {
        return false;
    };
    let mut from = 0;
    for (range, splice) in edits {
        let Splice::Number(n) = splice else {
            return false;
        };
        if range.start < from || range.end > data.len() || !has_digits(*n, range.len()) {
            return false;
        }
        from = range.end;
    }
    let at = out.len() + data.start;
    out.extend_from_slice(event.raw());
    for (range, splice) in edits {
        if let Splice::Number(n) = splice {
            write_digits(&mut out[at + range.start..at + range.end], *n);
        }
    }
    true
}

/// Whether `n` is written with exactly `len` decimal digits.
fn has_digits(n: u64, len: usize) -> bool {
    match len {
        0 => false,
        1..=19 => n < POW10[len] && (len == 1 || n >= POW10[len - 1]),
        20 => n >= POW10[19],
        _ => false,
    }
}

/// `10^i`, for every `i` that fits a `u64`.
const POW10: [u64; 20] = {
    let mut table = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// Writes `n` in decimal into `slot`, which has room for exactly its digits.
fn write_digits(slot: &mut [u8], mut n: u64) {
    for byte in slot.iter_mut().rev() {
        *byte = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// [`write()`], a piece at a time: the raw bytes between the edits, and what replaces each.
fn write_spliced(event: &Event, edits: &[Edit], out: &mut BytesMut) {
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

/// [`write_spliced`] on the event's joined data, written back as `data` lines; the event as it is
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::core::sse::{Item, Parser};

    /// The event of `lines` as `data` lines.
    fn event(lines: &[String]) -> Event {
        let mut raw = String::from("event: x\n");
        for line in lines {
            raw += &format!("data: {line}\n");
        }
        raw += "\n";
        let mut parser = Parser::new(usize::MAX);
        parser.push(raw.as_bytes());
        match parser.next_item() {
            Some(Item::Event(event)) => event,
            other => panic!("not an event: {other:?}"),
        }
    }

    proptest! {
        /// In place or a piece at a time, the same bytes: for numbers of as many digits as
        /// the old ones or not, text splices, ranges out of order, past the data or across
        /// its lines.
        #[test]
        fn in_place_writes_what_splicing_writes(
            lines in proptest::collection::vec("[a-z0-9\":,{}]{0,24}", 1..3),
            edits in proptest::collection::vec((0usize..50, prop_oneof![
                // As many digits as the range has, mostly.
                6 => (0u64..100_000).prop_map(|n| (n.to_string().len(), Some(n))),
                2 => (0usize..6, 0u64..100_000).prop_map(|(len, n)| (len, Some(n))),
                1 => (0usize..6).prop_map(|len| (len, None)),
            ]), 0..4),
            sorted in any::<bool>(),
        ) {
            let event = event(&lines);
            let mut edits: Vec<Edit> = edits
                .into_iter()
                .map(|(start, (len, n))| {
                    let splice = n.map_or_else(|| Splice::Text("t".into()), Splice::Number);
                    (start..start + len, splice)
                })
                .collect();
            if sorted {
                edits.sort_unstable_by_key(|e| e.0.start);
            }
            let (mut quick, mut spliced) = (BytesMut::from("before"), BytesMut::from("before"));
            write(&event, &edits, &mut quick);
            write_spliced(&event, &edits, &mut spliced);
            prop_assert_eq!(quick, spliced);
        }
    }

    #[test]
    fn numbers_of_as_many_digits_are_written_in_place() {
        let event = event(&[r#"{"sequence_number":41,"output_index":3}"#.into()]);
        let edits = [(19..21, Splice::Number(42)), (37..38, Splice::Number(0))];
        let mut out = BytesMut::new();
        assert!(write_in_place(&event, &edits, &mut out));
        let want = "event: x\ndata: {\"sequence_number\":42,\"output_index\":0}\n\n";
        assert_eq!(&out[..], want.as_bytes());
        assert!(!write_in_place(
            &event,
            &[(19..21, Splice::Number(100))],
            &mut out
        ));
        assert_eq!(&out[..], want.as_bytes(), "nothing written");
    }

    #[test]
    fn digits_counted_as_decimal_text_counts_them() {
        let mut edges = vec![0, u64::MAX, u64::MAX - 1];
        for p in POW10 {
            edges.extend([p - 1, p, p + 1]);
        }
        for n in edges {
            for len in 0..22 {
                assert_eq!(has_digits(n, len), n.to_string().len() == len, "{n} {len}");
            }
        }
    }

    /// A renumbered event's two numbers, given apart in either order, make the edits a sorted
    /// list makes.
    #[test]
    fn numbers_given_apart_write_as_a_sorted_list() {
        let event = event(&[r#"{"output_index":3,"sequence_number":41}"#.into()]);
        let index = || Number {
            value: 3,
            span: 16..17,
        };
        let sequence = || Number {
            value: 41,
            span: 36..38,
        };
        let (mut apart, mut listed) = (BytesMut::new(), BytesMut::new());
        let pair = [
            number(Some(sequence()), Some(42)),
            number(Some(index()), Some(1000)),
        ];
        write_numbers(&event, pair, &mut apart);
        let list = [(16..17, Splice::Number(1000)), (36..38, Splice::Number(42))];
        write(&event, &list, &mut listed);
        assert_eq!(apart, listed);
        let want = "event: x\ndata: {\"output_index\":1000,\"sequence_number\":42}\n\n";
        assert_eq!(&apart[..], want.as_bytes());
        assert!(number(Some(index()), Some(3)).is_none(), "unchanged");
        assert!(number(None, Some(3)).is_none() && number(Some(index()), None).is_none());
    }
}
