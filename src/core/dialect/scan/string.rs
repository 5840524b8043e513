//! Strings, for the scan: the search for the bytes that end a run of plain text, and the
//! skipping of a string with its escapes checked and its non-ASCII bytes checked as UTF-8.
//! `None` is a string serde_json refuses (the only verdict on a string alone).

/// Bytes that end the fast run through a string: the closing quote, an escape, a control
/// character.
pub(super) static SPECIAL_IN_STRING: [bool; 256] = special_table(false);

/// [`SPECIAL_IN_STRING`] and the non-ASCII bytes (whose UTF-8 is checked apart).
pub(super) static SPECIAL_OR_HIGH: [bool; 256] = special_table(true);

const fn special_table(high: bool) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = b < 0x20 || b == b'"' as usize || b == b'\\' as usize || (high && b >= 0x80);
        b += 1;
    }
    table
}

/// The offset of the first byte of `bytes` in [`SPECIAL_IN_STRING`] (with `HIGH_TOO`, in
/// [`SPECIAL_OR_HIGH`]). Eight bytes at a time (the bit tricks of "Bit Twiddling Hacks", as
/// serde_json's own string scan does): the lowest flagged byte of a word is always a true
/// match, later ones may not be.
#[inline]
pub(super) fn special_in_string<const HIGH_TOO: bool>(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let below = |word: u64, n: u8| word.wrapping_sub(ONES * u64::from(n)) & !word & HIGH;
    let mut at = 0;
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let mut flagged = below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1)
            | below(word, 0x20);
        if HIGH_TOO {
            flagged |= word & HIGH;
        }
        if flagged != 0 {
            return Some(at + (flagged.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let table = if HIGH_TOO {
        &SPECIAL_OR_HIGH
    } else {
        &SPECIAL_IN_STRING
    };
    let tail = words.remainder();
    tail.iter().position(|&b| table[b as usize]).map(|i| at + i)
}

/// The bytes of `word` (eight of the data, the first lowest) that end a run of plain ASCII in a
/// string: the closing quote, an escape, a control character, a non-ASCII byte. The test of
/// [`special_in_string::<true>`] with fewer operations: a byte with its high bit set is flagged
/// anyway, so the terms that kept such bytes out are not needed. As there, only the lowest
/// flagged byte is sure to be one (a borrow starts only at a flagged byte, and reaches only
/// higher ones).
#[inline(always)]
fn plain_end(word: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    ((word ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES)
        | (word ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES)
        | word.wrapping_sub(ONES * 0x20)
        | word)
        & HIGH
}

/// The string whose opening quote is at `quote`: where it ends (past its closing quote) and
/// whether it has an escape. Most strings of an event are short runs of plain ASCII: those are
/// skipped here, eight bytes at a time ([`plain_end`]), and the first byte that is not plain
/// ASCII (an escape, a control character, a non-ASCII byte) hands the rest to
/// [`rest_of_string`], out of line (so that the caller's cursor can stay in registers).
#[inline(always)]
pub(super) fn skip(data: &[u8], quote: usize) -> Option<(usize, bool)> {
    let mut rest = data.get(quote + 1..)?;
    let flagged = loop {
        if let Some((word, tail)) = rest.split_first_chunk::<8>() {
            let flagged = plain_end(u64::from_le_bytes(*word));
            if flagged != 0 {
                break flagged;
            }
            rest = tail;
        } else if !rest.is_empty() && data.len() >= 8 {
            // Fewer than eight bytes left: the data's last eight, the ones already passed
            // shifted out. The zero bytes shifted in end the run as control characters would,
            // at the end of the data.
            let last = data.last_chunk::<8>().copied().unwrap_or_default();
            break plain_end(u64::from_le_bytes(last) >> (8 * (8 - rest.len())));
        } else {
            return rest_of_string(data, data.len() - rest.len());
        }
    };
    let at = data.len() - rest.len() + (flagged.trailing_zeros() / 8) as usize;
    match data.get(at)? {
        b'"' => Some((at + 1, false)),
        _ => rest_of_string(data, at),
    }
}

/// The rest of a string from `at` (a byte that is not plain ASCII, or the data's last few
/// bytes), as [`skip`]. Its non-ASCII bytes must be UTF-8: each run of them up to the next
/// quote, escape or control character is checked whole (no UTF-8 sequence holds an ASCII
/// byte).
#[inline(never)]
fn rest_of_string(data: &[u8], mut at: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        at += special_in_string::<true>(&data[at..])?;
        at = match data[at] {
            b'"' => return Some((at + 1, escaped)),
            b'\\' => {
                escaped = true;
                escape(data, at)?
            }
            0x80.. => non_ascii(data, at)?,
            _ => return None, // a control character
        };
    }
}

/// At a non-ASCII byte `at` in a string: the run up to the next special byte is checked as
/// UTF-8; where it ends.
#[cold]
fn non_ascii(data: &[u8], at: usize) -> Option<usize> {
    let rest = &data[at..];
    let end = special_in_string::<false>(rest)?;
    std::str::from_utf8(&rest[..end]).ok()?;
    Some(at + end)
}

/// The escape at the backslash `at`: one of `"\/bfnrt`, or `u` and four hex digits (which
/// serde_json does not check for surrogates when it skips a string); where it ends.
fn escape(data: &[u8], at: usize) -> Option<usize> {
    match data.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(at + 2),
        b'u' => {
            let hex = data.get(at + 2..at + 6)?;
            hex.iter().all(u8::is_ascii_hexdigit).then_some(at + 6)
        }
        _ => None,
    }
}
