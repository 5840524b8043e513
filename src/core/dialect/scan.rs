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

use string::special_in_string;
#[cfg(test)]
use string::{SPECIAL_IN_STRING, SPECIAL_OR_HIGH};

/// Deeper nesting is left to serde_json (which skips values iteratively, with no depth limit).
const MAX_DEPTH: u32 = 64;

/// The type of most events of a stream, as a JSON string.
const QUOTED_TEXT_DELTA: &[u8] = b"\"response.output_text.delta\"";

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

/// The bytes `whitespace` skips.
const fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while self.peek().is_some_and(is_whitespace) {
            self.at += 1;
        }
    }

    /// The next byte that is not whitespace, the cursor moved onto it. Events are mostly
    /// written without whitespace between tokens: the byte at the cursor is looked at first,
    /// and only whitespace there costs the loop.
    #[inline(always)]
    fn token(&mut self) -> Option<u8> {
        match self.peek() {
            Some(b) if is_whitespace(b) => {
                self.whitespace();
                self.peek()
            }
            next => next,
        }
    }

    /// The byte `byte` after any whitespace, stepped over.
    #[inline(always)]
    fn eat(&mut self, byte: u8) -> Step {
        if self.token() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(Stop::Invalid)
        }
    }

    /// The top-level object, recording the wanted members.
    fn object(&mut self, read_whole: impl Fn(&[u8]) -> bool) -> Step<Members> {
        let mut members = Members::default();
        self.eat(b'{')?;
        match self.token() {
            Some(b'}') => {
                self.at += 1;
                return Ok(members);
            }
            Some(b'"') => {}
            _ => return Err(Stop::Invalid),
        }
        loop {
            // At a key's opening quote.
            let key = self.top_level_key()?;
            self.eat(b':')?;
            let first = self.token().ok_or(Stop::Invalid)?;
            let start = self.at;
            if key == Key::Type && first == b'"' {
                // The caller's hint: an escaped type, or one it reads whole, is declined. The
                // usual type (which holds no escape) is compared where it lies, not scanned.
                let kind = if self.data[start..].starts_with(QUOTED_TEXT_DELTA) {
                    self.at += QUOTED_TEXT_DELTA.len();
                    &QUOTED_TEXT_DELTA[1..QUOTED_TEXT_DELTA.len() - 1]
                } else if self.string()? {
                    return Err(Stop::Decline);
                } else {
                    &self.data[start + 1..self.at - 1]
                };
                if read_whole(kind) {
                    return Err(Stop::Decline);
                }
            } else {
                self.value(first)?;
            }
            let span = Some(start..self.at);
            match key {
                Key::Type => members.kind = span,
                Key::SequenceNumber => members.sequence_number = span,
                Key::OutputIndex => members.output_index = span,
                Key::Other => {}
            }
            if self.after_member()? {
                return Ok(members);
            }
        }
    }

    /// After a member of an object: a comma and the next key's opening quote (`false`), or the
    /// closing brace, stepped over (`true`).
    #[inline(always)]
    fn after_member(&mut self) -> Step<bool> {
        match self.token() {
            Some(b',') => {
                self.at += 1;
                if self.token() == Some(b'"') {
                    Ok(false)
                } else {
                    Err(Stop::Invalid)
                }
            }
            Some(b'}') => {
                self.at += 1;
                Ok(true)
            }
            _ => Err(Stop::Invalid),
        }
    }

    /// The object at the cursor, every member visited ([`visit_members`]).
    fn all_members(&mut self, mut member: impl FnMut(Range<usize>, Range<usize>)) -> Step {
        self.eat(b'{')?;
        match self.token() {
            Some(b'}') => {
                self.at += 1;
                return Ok(());
            }
            Some(b'"') => {}
            _ => return Err(Stop::Invalid),
        }
        loop {
            let key = self.at + 1;
            if self.string()? {
                return Err(Stop::Decline);
            }
            let key = key..self.at - 1;
            self.eat(b':')?;
            let first = self.token().ok_or(Stop::Invalid)?;
            let start = self.at;
            self.value(first)?;
            member(key, start..self.at);
            if self.after_member()? {
                return Ok(());
            }
        }
    }

    /// A string starting at the opening quote ([`string::skip`]); returns whether it has an
    /// escape.
    #[inline(always)]
    fn string(&mut self) -> Step<bool> {
        let (end, escaped) = string::skip(self.data, self.at).ok_or(Stop::Invalid)?;
        self.at = end;
        Ok(escaped)
    }

    /// A top-level key at its opening quote: one of the wanted ones, or another key of the
    /// usual events (a text delta's), is compared whole (its bytes need no scan), any other
    /// scanned as a string; one with an escape is declined.
    #[inline]
    fn top_level_key(&mut self) -> Step<Key> {
        const TYPE: &[u8] = b"\"type\"";
        const SEQUENCE_NUMBER: &[u8] = b"\"sequence_number\"";
        const OUTPUT_INDEX: &[u8] = b"\"output_index\"";
        const ITEM_ID: &[u8] = b"\"item_id\"";
        const CONTENT_INDEX: &[u8] = b"\"content_index\"";
        const DELTA: &[u8] = b"\"delta\"";
        const LOGPROBS: &[u8] = b"\"logprobs\"";
        const OBFUSCATION: &[u8] = b"\"obfuscation\"";
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
            Some(b'o') if rest.starts_with(OBFUSCATION) => Some((Key::Other, OBFUSCATION.len())),
            Some(b'i') if rest.starts_with(ITEM_ID) => Some((Key::Other, ITEM_ID.len())),
            Some(b'c') if rest.starts_with(CONTENT_INDEX) => {
                Some((Key::Other, CONTENT_INDEX.len()))
            }
            Some(b'd') if rest.starts_with(DELTA) => Some((Key::Other, DELTA.len())),
            Some(b'l') if rest.starts_with(LOGPROBS) => Some((Key::Other, LOGPROBS.len())),
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

    /// Any value, skipped, from its first byte `first` (at the cursor). Inlined in both its
    /// callers, as is [`Cursor::nested`]: as a call, the renumbering scan costs ~10 % more.
    #[inline(always)]
    fn value(&mut self, first: u8) -> Step {
        // Strings and numbers first: most members of an event are one or the other.
        match first {
            b'"' => self.string().map(|_| ()),
            b'-' | b'0'..=b'9' => self.number(first),
            _ => self.nested(first),
        }
    }

    /// Any value, skipped, as [`Cursor::value`]; containers without recursion (a bit per level
    /// says `{` or `[`).
    #[inline(always)]
    fn nested(&mut self, first: u8) -> Step {
        let mut depth = 0u32;
        let mut objects = 0u64;
        let mut next = first;
        loop {
            // A value.
            match next {
                b'"' => {
                    self.string()?;
                }
                b'-' | b'0'..=b'9' => self.number(next)?,
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
                    let close = if open == b'{' { b'}' } else { b']' };
                    let inner = self.token();
                    if inner == Some(close) {
                        self.at += 1;
                        objects >>= 1;
                        depth -= 1;
                    } else {
                        if open == b'{' {
                            self.key()?;
                        }
                        next = self.token().ok_or(Stop::Invalid)?;
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
                let in_object = objects & 1 == 1;
                match self.token() {
                    Some(b',') => {
                        self.at += 1;
                        if in_object {
                            self.token();
                            self.key()?;
                        }
                        next = self.token().ok_or(Stop::Invalid)?;
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

    /// A nested object's key, at the cursor, and its colon.
    fn key(&mut self) -> Step {
        if self.peek() != Some(b'"') {
            return Err(Stop::Invalid);
        }
        self.string()?;
        self.eat(b':')
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, with no digit right after a lone 0,
    /// from `first`, the byte at the cursor. The integer part here, and one look at the byte
    /// after it for the rest (most numbers of an event are plain integers).
    #[inline(always)]
    fn number(&mut self, first: u8) -> Step {
        let mut lead = Some(first);
        if first == b'-' {
            self.at += 1;
            lead = self.peek();
        }
        match lead {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.at += 1;
                self.digits();
            }
            _ => return Err(Stop::Invalid),
        }
        match self.peek() {
            // Only after a lone 0: other digits were all taken.
            Some(b'0'..=b'9') => Err(Stop::Invalid),
            Some(b'.' | b'e' | b'E') => self.fraction_and_exponent(),
            _ => Ok(()),
        }
    }

    /// A number's fraction and exponent, each optional, at the byte after its integer part.
    fn fraction_and_exponent(&mut self) -> Step {
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

mod string;
#[cfg(test)]
mod tests;
