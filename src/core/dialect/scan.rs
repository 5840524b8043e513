//! A structural scan of an event's JSON for the few top-level members toolpulse needs when it
//! only has to renumber an event: where `type`, `sequence_number` and `output_index` lie.
//!
//! Most events of a stream with tool calls are read only so their numbers can be rewritten;
//! reading them with serde_json (every member deserialized as a raw value) cost ~40 % of the
//! core's time on such a stream. This scan validates the JSON exactly as serde_json does when
//! it skips a value (strings with valid escapes and no control characters, the number grammar,
//! literals, balanced containers, nothing after the object) and records where the wanted
//! members' values lie, without building anything. No crate does "validate and locate
//! top-level members" without materialising the values, hence the hand-written scanner.
//!
//! It declines ([`Scan::Decline`]) whatever it does not decide the way serde_json would with
//! certainty — a top-level key with an escape (serde_json unescapes keys), nesting deeper than
//! [`MAX_DEPTH`] — and the events the caller reads with serde_json anyway (a top-level `type`
//! whose string has an escape or that the caller's predicate wants read whole), and the caller
//! then reads the event with serde_json. It checks UTF-8 as it goes (only string contents can
//! hold non-ASCII bytes), so the data need not be checked first. Its agreement with serde_json
//! is tested on every fixture and by a property test (`dialect::responses`).
//!
//! [`visit_members`] locates every top-level member the same way, so that the events toolpulse
//! reads whole (a tool call's items) are read without serde_json's machinery where the scan can
//! decide.

use std::ops::Range;

/// Deeper nesting is left to serde_json (which skips values iteratively, with no depth limit).
const MAX_DEPTH: u32 = 64;

/// Where the wanted top-level members' values lie (the last occurrence of a repeated key, as
/// serde_json and every client keep it), as byte ranges of the data.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Members {
    pub kind: Option<Range<usize>>,
    pub sequence_number: Option<Range<usize>>,
    pub output_index: Option<Range<usize>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// One valid JSON object.
    Object(Members),
    /// Not one valid JSON object (serde_json refuses it too).
    Invalid,
    /// Valid or not, serde_json must decide.
    Decline,
}

/// Scans `data`: [`Scan::Invalid`] also when it is not UTF-8.
#[cfg(test)]
pub fn scan(data: &[u8]) -> Scan {
    scan_unless(data, |_| false)
}

/// [`scan`], declining as soon as a top-level `type` is a string with an escape or one that
/// `read_whole` wants read by serde_json (a hint: a later `type` member overrides it, and the
/// caller reads the event whole either way).
pub fn scan_unless(data: &[u8], read_whole: impl Fn(&[u8]) -> bool) -> Scan {
    let mut cursor = Cursor { data, at: 0 };
    match cursor.object(read_whole) {
        Ok(members) => {
            cursor.whitespace();
            if cursor.at == data.len() {
                Scan::Object(members)
            } else {
                Scan::Invalid
            }
        }
        Err(Stop::Invalid) => Scan::Invalid,
        Err(Stop::Decline) => Scan::Decline,
    }
}

/// Visits the top-level members of the one JSON object `data`: each key (without its quotes)
/// and value, as byte ranges of the data, in order, repeats included. Returns whether the scan
/// decided: `false` when `data` is not one valid object, and when the scan declines (a key with
/// an escape, which serde_json unescapes; nesting deeper than [`MAX_DEPTH`]). serde_json
/// decides then, and what was visited before must be forgotten.
pub fn visit_members(data: &[u8], member: impl FnMut(Range<usize>, Range<usize>)) -> bool {
    let mut cursor = Cursor { data, at: 0 };
    if cursor.all_members(member).is_err() {
        return false;
    }
    cursor.whitespace();
    cursor.at == data.len()
}

/// Whether a string's bytes need no escape in JSON: no `"`, `\\` or control character (the bytes
/// serde_json escapes, and the only ones a JSON string may not hold raw). Such a string is
/// written, and read back, as it lies between its quotes.
pub fn is_plain(bytes: &[u8]) -> bool {
    special_in_string::<false>(bytes).is_none()
}

enum Stop {
    Invalid,
    Decline,
}

type Step<T = ()> = Result<T, Stop>;

/// Bytes that end the fast run through a string: the closing quote, an escape, a control
/// character.
static SPECIAL_IN_STRING: [bool; 256] = special_table(false);

/// [`SPECIAL_IN_STRING`] and the non-ASCII bytes (whose UTF-8 is checked apart).
static SPECIAL_OR_HIGH: [bool; 256] = special_table(true);

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
fn special_in_string<const HIGH_TOO: bool>(bytes: &[u8]) -> Option<usize> {
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

/// A top-level key, as far as the scan cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Type,
    SequenceNumber,
    OutputIndex,
    Other,
}

struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.at).copied()
    }

    #[inline]
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Step {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(Stop::Invalid)
        }
    }

    /// The top-level object, recording the wanted members.
    fn object(&mut self, read_whole: impl Fn(&[u8]) -> bool) -> Step<Members> {
        let mut members = Members::default();
        self.whitespace();
        self.eat(b'{')?;
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(members);
        }
        loop {
            self.whitespace();
            if self.peek() != Some(b'"') {
                return Err(Stop::Invalid);
            }
            let key = self.top_level_key()?;
            self.whitespace();
            self.eat(b':')?;
            self.whitespace();
            let start = self.at;
            if key == Key::Type && self.peek() == Some(b'"') {
                // The caller's hint: an escaped type, or one it reads whole, is declined.
                if self.string()? || read_whole(&self.data[start + 1..self.at - 1]) {
                    return Err(Stop::Decline);
                }
            } else {
                self.value()?;
            }
            let span = Some(start..self.at);
            match key {
                Key::Type => members.kind = span,
                Key::SequenceNumber => members.sequence_number = span,
                Key::OutputIndex => members.output_index = span,
                Key::Other => {}
            }
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(members);
                }
                _ => return Err(Stop::Invalid),
            }
        }
    }

    /// The object at the cursor, every member visited ([`visit_members`]).
    fn all_members(&mut self, mut member: impl FnMut(Range<usize>, Range<usize>)) -> Step {
        self.whitespace();
        self.eat(b'{')?;
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.whitespace();
            if self.peek() != Some(b'"') {
                return Err(Stop::Invalid);
            }
            let key = self.at + 1;
            if self.string()? {
                return Err(Stop::Decline);
            }
            let key = key..self.at - 1;
            self.whitespace();
            self.eat(b':')?;
            self.whitespace();
            let start = self.at;
            self.value()?;
            member(key, start..self.at);
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(Stop::Invalid),
            }
        }
    }

    /// A top-level key at its opening quote: one of the wanted ones is compared whole (its
    /// bytes need no scan), any other scanned as a string; one with an escape is declined.
    #[inline]
    fn top_level_key(&mut self) -> Step<Key> {
        const TYPE: &[u8] = b"\"type\"";
        const SEQUENCE_NUMBER: &[u8] = b"\"sequence_number\"";
        const OUTPUT_INDEX: &[u8] = b"\"output_index\"";
        let rest = &self.data[self.at..];
        // Each comparison of a constant length, so that it is compiled inline (a `memcmp`
        // call costs more than the scan it saves).
        let known = match rest.get(1) {
            Some(b't') if rest.starts_with(TYPE) => Some((Key::Type, TYPE.len())),
            Some(b's') if rest.starts_with(SEQUENCE_NUMBER) => {
                Some((Key::SequenceNumber, SEQUENCE_NUMBER.len()))
            }
            Some(b'o') if rest.starts_with(OUTPUT_INDEX) => {
                Some((Key::OutputIndex, OUTPUT_INDEX.len()))
            }
            _ => None,
        };
        if let Some((key, len)) = known {
            self.at += len;
            return Ok(key);
        }
        if self.string()? {
            return Err(Stop::Decline);
        }
        Ok(Key::Other)
    }

    /// A string starting at the opening quote; returns whether it has an escape. Its non-ASCII
    /// bytes must be UTF-8: each run of them up to the next quote, escape or control character
    /// is checked whole (no UTF-8 sequence holds an ASCII byte).
    #[inline]
    fn string(&mut self) -> Step<bool> {
        self.at += 1;
        let mut escaped = false;
        loop {
            self.at += special_in_string::<true>(&self.data[self.at..]).ok_or(Stop::Invalid)?;
            match self.data[self.at] {
                b'"' => {
                    self.at += 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                0x80.. => self.non_ascii()?,
                _ => return Err(Stop::Invalid), // a control character
            }
        }
    }

    /// At a non-ASCII byte in a string: the run up to the next special byte is checked as
    /// UTF-8 and skipped.
    #[cold]
    fn non_ascii(&mut self) -> Step {
        let rest = &self.data[self.at..];
        let end = special_in_string::<false>(rest).ok_or(Stop::Invalid)?;
        std::str::from_utf8(&rest[..end]).map_err(|_| Stop::Invalid)?;
        self.at += end;
        Ok(())
    }

    /// The escape at the backslash: one of `"\/bfnrt`, or `u` and four hex digits (which
    /// serde_json does not check for surrogates when it skips a string).
    fn escape(&mut self) -> Step {
        self.at += 1;
        match self.peek() {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.at += 1;
                Ok(())
            }
            Some(b'u') => {
                let hex = self
                    .data
                    .get(self.at + 1..self.at + 5)
                    .ok_or(Stop::Invalid)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return Err(Stop::Invalid);
                }
                self.at += 5;
                Ok(())
            }
            _ => Err(Stop::Invalid),
        }
    }

    /// Any value, skipped; containers without recursion (a bit per level says `{` or `[`).
    /// Inlined in both its callers: as a call, the renumbering scan costs ~10 % more.
    #[inline(always)]
    fn value(&mut self) -> Step {
        let mut depth = 0u32;
        let mut objects = 0u64;
        loop {
            // A value.
            self.whitespace();
            match self.peek().ok_or(Stop::Invalid)? {
                b'"' => {
                    self.string()?;
                }
                b'-' | b'0'..=b'9' => self.number()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                open @ (b'{' | b'[') => {
                    if depth == MAX_DEPTH {
                        return Err(Stop::Decline);
                    }
                    self.at += 1;
                    objects = objects << 1 | u64::from(open == b'{');
                    depth += 1;
                    self.whitespace();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.at += 1;
                        objects >>= 1;
                        depth -= 1;
                    } else {
                        if open == b'{' {
                            self.key()?;
                        }
                        continue;
                    }
                }
                _ => return Err(Stop::Invalid),
            }
            // After a value: the enclosing containers' commas and ends.
            loop {
                if depth == 0 {
                    return Ok(());
                }
                self.whitespace();
                let in_object = objects & 1 == 1;
                match self.peek() {
                    Some(b',') => {
                        self.at += 1;
                        if in_object {
                            self.whitespace();
                            self.key()?;
                        }
                        break;
                    }
                    Some(b'}') if in_object => {}
                    Some(b']') if !in_object => {}
                    _ => return Err(Stop::Invalid),
                }
                self.at += 1;
                objects >>= 1;
                depth -= 1;
            }
        }
    }

    /// A nested object's key and its colon.
    fn key(&mut self) -> Step {
        if self.peek() != Some(b'"') {
            return Err(Stop::Invalid);
        }
        self.string()?;
        self.whitespace();
        self.eat(b':')
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, with no digit right after a lone 0.
    fn number(&mut self) -> Step {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.at += 1;
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return Err(Stop::Invalid);
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Stop::Invalid),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Step {
        if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return Err(Stop::Invalid);
        }
        self.digits();
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Step {
        if self.data[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(Stop::Invalid)
        }
    }
}

#[cfg(test)]
mod tests;
