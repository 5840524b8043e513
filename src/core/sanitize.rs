//! Sanitizing of the payloads some event profiles carry (tool arguments and tool results) before
//! they reach a client.
//!
//! [`Sanitizer`] works on whole payloads: it redacts the values of secret-looking keys, cuts long
//! strings and caps the payload's total size. [`PartialRedactor`] works on JSON text that arrives in
//! pieces (streamed tool arguments) and only redacts; the caller bounds the total.
//!
//! Invariants:
//! - a key is secret iff a redact pattern (a glob, case-insensitive, `*` crossing `/`) matches it;
//!   the value of a secret key, whatever its type and at any depth, never reaches the client: it
//!   becomes the string [`REDACTED`];
//! - [`Sanitizer::value`]: every string that is not [`REDACTED`] is at most `max_string_bytes`
//!   plus "…", cut on a char boundary; an object over `max_payload_bytes` keeps only the entries
//!   that fit and says `"truncated": true`;
//! - text that is not valid JSON (a model's malformed arguments, a truncated result) still goes
//!   through the redactor, so `"api_key": "…"` inside it is redacted too;
//! - [`PartialRedactor`] copies its input verbatim except for redacted values, one character at a
//!   time, so its output is a function of the concatenated input alone (however it was split),
//!   nothing is held back, and for valid JSON the output parses to the input with the secret
//!   keys' values redacted. For invalid JSON it never panics and never emits a character of a
//!   value it has attributed to a secret key.

use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::{Map, Value};

pub const DEFAULT_REDACT_PATTERNS: &[&str] = &[
    "*key*",
    "*token*",
    "*secret*",
    "*password*",
    "authorization",
    "cookie",
];
pub const DEFAULT_MAX_STRING_BYTES: usize = 2048;
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 8192;
pub const REDACTED: &str = "[REDACTED]";

const ELLIPSIS: char = '…';
const TRUNCATED_KEY: &str = "truncated";
const PREVIEW_KEY: &str = "preview";
/// The smallest capped object: the marker alone. A cap below this is exceeded by the marker.
const MARKER_BYTES: usize = r#"{"truncated":true}"#.len();

/// Redaction, string cutting and a size cap for whole payloads.
#[derive(Debug, Clone)]
pub struct Sanitizer {
    /// Shared with every [`PartialRedactor`] so starting one per tool call costs no compile.
    secret_keys: Arc<GlobSet>,
    max_string_bytes: usize,
    max_payload_bytes: usize,
}

impl Sanitizer {
    /// Errors name the index of the bad pattern.
    pub fn new(
        patterns: &[String],
        max_string_bytes: usize,
        max_payload_bytes: usize,
    ) -> Result<Self, (usize, globset::Error)> {
        let mut builder = GlobSetBuilder::new();
        for (index, pattern) in patterns.iter().enumerate() {
            let glob = GlobBuilder::new(pattern)
                .case_insensitive(true)
                // Keys are not paths: `*` must also match `/`.
                .literal_separator(false)
                .build()
                .map_err(|error| (index, error))?;
            builder.add(glob);
        }
        // Each glob compiled alone, so the set can only fail on the combined regex's size limit,
        // which the last pattern is the one to push over.
        let set = builder
            .build()
            .map_err(|error| (patterns.len().saturating_sub(1), error))?;
        Ok(Sanitizer {
            secret_keys: Arc::new(set),
            max_string_bytes,
            max_payload_bytes,
        })
    }

    /// Redacts secret-looking keys at any depth (value becomes "[REDACTED]"), cuts strings longer
    /// than max_string_bytes on a UTF-8 char boundary and appends "…", then caps the whole payload:
    /// if its compact JSON is over max_payload_bytes, an object keeps its top-level entries in
    /// order while the total stays within the cap (skipping entries that would overflow it) and
    /// gains "truncated": true; anything else becomes
    /// {"truncated": true, "preview": <its compact JSON text cut to max_string_bytes with "…">}.
    pub fn value(&self, mut value: Value) -> Value {
        self.scrub(&mut value, true);
        self.cap(value)
    }

    /// A message (a progress report's, a tool's error): through `value`, so it is cut like any
    /// string but not re-quoted.
    pub fn message(&self, message: String) -> String {
        match self.value(Value::String(message)) {
            Value::String(message) => message,
            other => other.to_string(),
        }
    }

    /// A tool output or argument text: if it parses as JSON, `value(parsed)`; otherwise the text
    /// as a JSON string, redacted as far as it looks like JSON and cut like any string.
    pub fn text(&self, text: &str) -> Value {
        match serde_json::from_str::<Value>(text) {
            Ok(parsed) => self.value(parsed),
            Err(_) => Value::String(self.non_json(text)),
        }
    }

    /// The same as `text` but always rendered back to a string (for fields typed as strings):
    /// JSON stays compact JSON text after sanitizing; non-JSON text is redacted and cut.
    pub fn text_as_string(&self, text: &str) -> String {
        match serde_json::from_str::<Value>(text) {
            Ok(parsed) => self.value(parsed).to_string(),
            Err(_) => self.non_json(text),
        }
    }

    /// A tool's result as a string (the `output` of a companion item): JSON is sanitized by
    /// `value` and stays compact JSON text; other text is redacted as far as it looks like JSON
    /// and cut at `max_payload_bytes` on a UTF-8 boundary.
    pub fn result_text(&self, text: &str) -> String {
        match serde_json::from_str::<Value>(text) {
            Ok(parsed) => self.value(parsed).to_string(),
            Err(_) => self.redacted_text(text, self.max_payload_bytes),
        }
    }

    /// An incremental redactor for JSON text that arrives in pieces (streamed tool arguments).
    pub fn streaming(&self) -> PartialRedactor {
        PartialRedactor {
            secret_keys: Arc::clone(&self.secret_keys),
            stack: Vec::new(),
            string: None,
            key: String::new(),
            high_surrogate: None,
            skip: None,
            emitted: 0,
        }
    }

    fn is_secret(&self, key: &str) -> bool {
        self.secret_keys.is_match(key)
    }

    /// Text that did not parse may still be almost-JSON holding a secret (malformed or truncated
    /// arguments), so it goes through the redactor, which leaves plain prose as it is.
    fn non_json(&self, text: &str) -> String {
        self.redacted_text(text, self.max_string_bytes)
    }

    /// Non-JSON text, redacted as far as it looks like JSON and cut at `max` bytes.
    fn redacted_text(&self, text: &str, max: usize) -> String {
        let mut redactor = self.streaming();
        let mut out = redactor.push(text);
        out.push_str(&redactor.finish());
        cut_string(&mut out, max);
        out
    }

    /// Redacts in place and, when `cut`, cuts strings. Redacted values are not recursed into.
    fn scrub(&self, value: &mut Value, cut: bool) {
        match value {
            Value::String(text) if cut => cut_string(text, self.max_string_bytes),
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub(item, cut)),
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    if self.is_secret(key) {
                        *item = Value::String(REDACTED.to_owned());
                    } else {
                        self.scrub(item, cut);
                    }
                }
            }
            _ => {}
        }
    }

    fn cap(&self, value: Value) -> Value {
        if json_len(&value) <= self.max_payload_bytes {
            return value;
        }
        let mut capped = Map::new();
        match value {
            Value::Object(map) => {
                // Sizes add up exactly: `{"truncated":true}` plus `,"key":value` per kept entry,
                // whatever order the map serializes in.
                let mut total = MARKER_BYTES;
                for (key, item) in map {
                    if key == TRUNCATED_KEY {
                        continue; // the marker replaces it
                    }
                    let entry = 1 + json_len(key.as_str()) + 1 + json_len(&item);
                    if total + entry <= self.max_payload_bytes {
                        total += entry;
                        capped.insert(key, item);
                    }
                }
            }
            other => {
                let mut preview = other.to_string();
                cut_string(&mut preview, self.max_string_bytes);
                capped.insert(PREVIEW_KEY.to_owned(), Value::String(preview));
            }
        }
        capped.insert(TRUNCATED_KEY.to_owned(), Value::Bool(true));
        Value::Object(capped)
    }
}

impl Default for Sanitizer {
    fn default() -> Self {
        let patterns: Vec<String> = DEFAULT_REDACT_PATTERNS
            .iter()
            .map(|pattern| (*pattern).to_owned())
            .collect();
        Sanitizer::new(
            &patterns,
            DEFAULT_MAX_STRING_BYTES,
            DEFAULT_MAX_PAYLOAD_BYTES,
        )
        .expect("the default redact patterns are valid globs")
    }
}

/// Cuts `text` to at most `max` bytes on a char boundary and appends "…" if it was longer.
fn cut_string(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1; // terminates: 0 is a boundary
    }
    text.truncate(at);
    text.push(ELLIPSIS);
}

/// Compact JSON length without building the text.
fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value)
        .expect("a JSON value or string serializes, and counting cannot fail");
    count.0
}

fn is_json_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// Redacts secret-valued keys in JSON text fed in arbitrary pieces, without waiting for the whole
/// document: `push` returns the redacted text for the bytes given so far.
///
/// It is a character-level lexer: everything outside a redacted value is copied as it arrives
/// (a key is copied while it is read and matched when its closing quote arrives, before any of
/// its value can), and a redacted value is replaced by `"[REDACTED]"` at its first character and
/// swallowed to its end. Nothing is held back.
#[derive(Debug, Clone)]
pub struct PartialRedactor {
    secret_keys: Arc<GlobSet>,
    /// Containers open outside any redacted value.
    stack: Vec<Frame>,
    /// The string being read outside any redacted value.
    string: Option<StringState>,
    /// The key being read, decoded, to match it when it closes.
    key: String,
    /// A `\uXXXX` high surrogate in the key, waiting for its low half.
    high_surrogate: Option<u32>,
    /// The redacted value being swallowed.
    skip: Option<Skip>,
    emitted: usize,
}

#[derive(Debug, Clone, Copy)]
enum Frame {
    Array,
    /// `secret`: the current member's key is secret, so any value in it is redacted.
    Object {
        phase: Phase,
        secret: bool,
    },
}

/// Where an object's current member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Key,
    Colon,
    Value,
    /// A value started. More value text before `,` is invalid JSON but, for a secret key,
    /// is redacted too (failing closed).
    After,
}

#[derive(Debug, Clone, Copy)]
struct StringState {
    is_key: bool,
    escape: Escape,
}

#[derive(Debug, Clone, Copy)]
enum Escape {
    None,
    Backslash,
    Unicode { digits: u8, code: u32 },
}

/// A redacted value being swallowed.
#[derive(Debug, Clone, Copy)]
struct Skip {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Started as a number or literal: it ends only at a delimiter at depth 0, so garbage glued
    /// to it is swallowed too.
    scalar: bool,
}

enum SkipStep {
    /// The character belongs to the value.
    Swallowed,
    /// The character was the value's last.
    Done,
    /// The character follows the value and is not part of it.
    Ended,
}

impl Skip {
    fn start(first: char) -> Skip {
        Skip {
            depth: usize::from(matches!(first, '{' | '[')),
            in_string: first == '"',
            escaped: false,
            scalar: !matches!(first, '"' | '{' | '['),
        }
    }

    fn feed(&mut self, c: char) -> SkipStep {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.in_string = false;
                if self.depth == 0 && !self.scalar {
                    return SkipStep::Done;
                }
            }
            return SkipStep::Swallowed;
        }
        match c {
            '"' => self.in_string = true,
            '{' | '[' => self.depth += 1,
            '}' | ']' | ',' if self.depth == 0 => return SkipStep::Ended,
            c if is_json_whitespace(c) && self.depth == 0 => return SkipStep::Ended,
            '}' | ']' => {
                self.depth -= 1;
                if self.depth == 0 && !self.scalar {
                    return SkipStep::Done;
                }
            }
            _ => {}
        }
        SkipStep::Swallowed
    }
}

impl PartialRedactor {
    pub fn push(&mut self, chunk: &str) -> String {
        let mut out = String::with_capacity(chunk.len());
        for c in chunk.chars() {
            self.step(c, &mut out);
        }
        self.emitted += out.len();
        out
    }

    /// End of input: whatever was held back. This lexer holds nothing back, so it is empty; it is
    /// part of the contract so that could change without touching callers.
    pub fn finish(&mut self) -> String {
        String::new()
    }

    /// Total bytes emitted so far.
    pub fn emitted_bytes(&self) -> usize {
        self.emitted
    }

    fn step(&mut self, c: char, out: &mut String) {
        if let Some(skip) = &mut self.skip {
            match skip.feed(c) {
                SkipStep::Swallowed => return,
                SkipStep::Done => {
                    self.skip = None;
                    return;
                }
                SkipStep::Ended => self.skip = None, // and `c` is handled below
            }
        }
        if let Some(string) = self.string {
            out.push(c);
            self.string_char(string, c);
            return;
        }
        if self.armed(c) {
            out.push('"');
            out.push_str(REDACTED);
            out.push('"');
            self.skip = Some(Skip::start(c));
            self.value_started();
            return;
        }
        out.push(c);
        match c {
            '{' => {
                self.value_started();
                self.stack.push(Frame::Object {
                    phase: Phase::Key,
                    secret: false,
                });
            }
            '[' => {
                self.value_started();
                self.stack.push(Frame::Array);
            }
            // Mismatched closers (invalid JSON) close whatever is open.
            '}' | ']' => {
                self.stack.pop();
            }
            ',' => {
                if let Some(Frame::Object { phase, secret }) = self.stack.last_mut() {
                    *phase = Phase::Key;
                    *secret = false;
                }
            }
            ':' => {
                if let Some(Frame::Object { phase, .. }) = self.stack.last_mut()
                    && *phase == Phase::Colon
                {
                    *phase = Phase::Value;
                }
            }
            '"' => {
                let is_key = matches!(
                    self.stack.last(),
                    Some(Frame::Object {
                        phase: Phase::Key,
                        ..
                    })
                );
                if is_key {
                    self.key.clear();
                    self.high_surrogate = None;
                } else {
                    self.value_started();
                }
                self.string = Some(StringState {
                    is_key,
                    escape: Escape::None,
                });
            }
            c if is_json_whitespace(c) => {}
            _ => self.value_started(),
        }
    }

    /// Whether `c`, outside any string, starts a value that belongs to a secret key.
    fn armed(&self, c: char) -> bool {
        let Some(Frame::Object {
            phase,
            secret: true,
        }) = self.stack.last()
        else {
            return false;
        };
        let ends_member = matches!(c, ',' | '}' | ']') || is_json_whitespace(c);
        match phase {
            Phase::Key => false,
            // A missing colon is invalid JSON, but what follows the key is still its value.
            Phase::Colon => !ends_member && c != ':',
            Phase::Value | Phase::After => !ends_member,
        }
    }

    fn value_started(&mut self) {
        if let Some(Frame::Object { phase, .. }) = self.stack.last_mut() {
            *phase = Phase::After;
        }
    }

    /// A character inside a string (already emitted): tracks escapes to find the closing quote
    /// and decodes a key to match it.
    fn string_char(&mut self, mut string: StringState, c: char) {
        match string.escape {
            Escape::Backslash => {
                string.escape = Escape::None;
                if c == 'u' {
                    string.escape = Escape::Unicode { digits: 0, code: 0 };
                } else if string.is_key {
                    self.key_char(unescape(c));
                }
                self.string = Some(string);
            }
            Escape::Unicode { digits, code } => match c.to_digit(16) {
                Some(digit) => {
                    let code = code * 16 + digit;
                    if digits == 3 {
                        string.escape = Escape::None;
                        if string.is_key {
                            self.key_unit(code);
                        }
                    } else {
                        string.escape = Escape::Unicode {
                            digits: digits + 1,
                            code,
                        };
                    }
                    self.string = Some(string);
                }
                // A malformed escape (invalid JSON): `c` is an ordinary character again.
                None => {
                    string.escape = Escape::None;
                    self.plain_string_char(string, c);
                }
            },
            Escape::None => self.plain_string_char(string, c),
        }
    }

    fn plain_string_char(&mut self, mut string: StringState, c: char) {
        match c {
            '\\' => {
                string.escape = Escape::Backslash;
                self.string = Some(string);
            }
            '"' => {
                self.string = None;
                if string.is_key {
                    if self.high_surrogate.take().is_some() {
                        self.key.push(char::REPLACEMENT_CHARACTER);
                    }
                    let secret = self.secret_keys.is_match(&self.key);
                    if let Some(Frame::Object { phase, secret: s }) = self.stack.last_mut() {
                        *phase = Phase::Colon;
                        *s = secret;
                    }
                }
            }
            _ => {
                if string.is_key {
                    self.key_char(c);
                }
                self.string = Some(string);
            }
        }
    }

    fn key_char(&mut self, c: char) {
        if self.high_surrogate.take().is_some() {
            self.key.push(char::REPLACEMENT_CHARACTER);
        }
        self.key.push(c);
    }

    /// A UTF-16 code unit from a `\uXXXX` escape in a key.
    fn key_unit(&mut self, unit: u32) {
        match unit {
            0xD800..=0xDBFF => {
                if self.high_surrogate.replace(unit).is_some() {
                    self.key.push(char::REPLACEMENT_CHARACTER);
                }
            }
            0xDC00..=0xDFFF => {
                let c = match self.high_surrogate.take() {
                    Some(high) => {
                        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00))
                    }
                    None => None,
                };
                self.key.push(c.unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            _ => self.key_char(char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER)),
        }
    }
}

/// The character a one-letter JSON escape stands for; `"`, `\` and `/` (and, in invalid JSON,
/// anything else) stand for themselves.
fn unescape(c: char) -> char {
    match c {
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        other => other,
    }
}

impl Sanitizer {
    /// The cap on one payload's JSON, in bytes.
    pub fn max_payload_bytes(&self) -> usize {
        self.max_payload_bytes
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn sanitizer(max_string_bytes: usize, max_payload_bytes: usize) -> Sanitizer {
        let patterns: Vec<String> = DEFAULT_REDACT_PATTERNS
            .iter()
            .map(|p| (*p).to_owned())
            .collect();
        Sanitizer::new(&patterns, max_string_bytes, max_payload_bytes).expect("valid defaults")
    }

    /// The defaults plus patterns that only match when a key's escapes (`\n`, surrogate pairs)
    /// are decoded right.
    fn escape_sensitive_sanitizer() -> Sanitizer {
        let patterns: Vec<String> = DEFAULT_REDACT_PATTERNS
            .iter()
            .copied()
            .chain(["*😀", "line\nbreak"])
            .map(str::to_owned)
            .collect();
        Sanitizer::new(&patterns, 1000, 10_000).expect("valid patterns")
    }

    fn redact_only(sanitizer: &Sanitizer, mut value: Value) -> Value {
        sanitizer.scrub(&mut value, false);
        value
    }

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("test text is JSON")
    }

    /// Streams `text` cut at the byte offsets `cuts` (sorted char boundaries).
    fn stream(sanitizer: &Sanitizer, text: &str, cuts: &[usize]) -> String {
        let mut redactor = sanitizer.streaming();
        let mut out = String::new();
        let mut start = 0;
        for &cut in cuts {
            out.push_str(&redactor.push(&text[start..cut]));
            start = cut;
        }
        out.push_str(&redactor.push(&text[start..]));
        out.push_str(&redactor.finish());
        assert_eq!(redactor.emitted_bytes(), out.len());
        out
    }

    fn stream_char_by_char(sanitizer: &Sanitizer, text: &str) -> String {
        let cuts: Vec<usize> = text.char_indices().map(|(at, _)| at).skip(1).collect();
        stream(sanitizer, text, &cuts)
    }

    fn boundaries(text: &str, picks: &[prop::sample::Index]) -> Vec<usize> {
        let mut cuts: Vec<usize> = picks
            .iter()
            .map(|pick| {
                let mut at = pick.index(text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                at
            })
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    }

    /// JSON with every character of every string (keys included) written as `\uXXXX`.
    fn escaped_json(value: &Value, out: &mut String) {
        fn string(text: &str, out: &mut String) {
            out.push('"');
            for c in text.chars() {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    write!(out, "\\u{unit:04x}").expect("writing to a String");
                }
            }
            out.push('"');
        }
        match value {
            Value::String(text) => string(text, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    escaped_json(item, out);
                }
                out.push(']');
            }
            Value::Object(map) => {
                out.push('{');
                for (i, (key, item)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    string(key, out);
                    out.push(':');
                    escaped_json(item, out);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    /// Every value under a secret key, at any depth, is exactly [`REDACTED`].
    fn assert_no_secret(sanitizer: &Sanitizer, value: &Value) {
        match value {
            Value::Array(items) => items.iter().for_each(|i| assert_no_secret(sanitizer, i)),
            Value::Object(map) => {
                for (key, item) in map {
                    if sanitizer.is_secret(key) {
                        assert_eq!(item, REDACTED, "under {key:?}");
                    } else {
                        assert_no_secret(sanitizer, item);
                    }
                }
            }
            _ => {}
        }
    }

    fn all_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::String(text) => out.push(text),
            Value::Array(items) => items.iter().for_each(|i| all_strings(i, out)),
            Value::Object(map) => map.values().for_each(|i| all_strings(i, out)),
            _ => {}
        }
    }

    #[test]
    fn matching_is_case_insensitive_and_exact_glob() {
        let s = Sanitizer::default();
        for key in [
            "api_key",
            "X-Api-Key",
            "accessToken",
            "Authorization",
            "AUTHORIZATION",
            "Cookie",
            "client_secret",
            "db/Password",
            "line\npassword",
        ] {
            assert!(s.is_secret(key), "{key}");
        }
        for key in ["query", "set-cookie", "authorization_url", "name", ""] {
            assert!(!s.is_secret(key), "{key}");
        }
    }

    #[test]
    fn bad_pattern_error_names_its_index() {
        let patterns = vec!["ok".to_owned(), "*fine*".to_owned(), "bad[".to_owned()];
        let (index, _) = Sanitizer::new(&patterns, 10, 100).expect_err("unclosed class");
        assert_eq!(index, 2);
    }

    #[test]
    fn marker_bytes_is_the_marker_alone() {
        assert_eq!(MARKER_BYTES, json_len(&json!({ "truncated": true })));
    }

    #[test]
    fn redacts_nested_in_arrays_of_objects() {
        let input = json!({
            "calls": [
                {"name": "a", "api_key": "k1"},
                {"nested": {"Authorization": "Bearer x", "keep": [{"password": "p"}]}},
                "plain"
            ],
            "query": "q"
        });
        let want = json!({
            "calls": [
                {"name": "a", "api_key": REDACTED},
                {"nested": {"Authorization": REDACTED, "keep": [{"password": REDACTED}]}},
                "plain"
            ],
            "query": "q"
        });
        assert_eq!(Sanitizer::default().value(input), want);
    }

    #[test]
    fn secret_value_of_any_type_is_replaced_whole() {
        let input = json!({
            "token": {"a": 1, "b": ["x"]},
            "password": [1, 2, {"c": null}],
            "secret_n": 42,
            "cookie": null,
            "x": {"private_key": true}
        });
        let want = json!({
            "token": REDACTED, "password": REDACTED, "secret_n": REDACTED, "cookie": REDACTED,
            "x": {"private_key": REDACTED}
        });
        assert_eq!(Sanitizer::default().value(input), want);
    }

    #[test]
    fn cuts_strings_on_a_char_boundary() {
        let cases = [
            (5, "ééé", "éé…"),  // 6 bytes; 5 falls inside the third 'é'
            (5, "😀😀", "😀…"), // 8 bytes; 5 falls inside the second emoji
            (3, "😀", "…"),     // nothing whole fits
            (0, "a", "…"),
            (4, "abcd", "abcd"), // exactly at the limit: untouched
            (7, "ab\"\\cdefg", "ab\"\\cde…"),
        ];
        for (max, input, want) in cases {
            let s = sanitizer(max, 1 << 20);
            assert_eq!(s.value(json!([input])), json!([want]), "{max} {input}");
        }
    }

    #[test]
    fn caps_a_megabyte_result_keeping_its_small_fields() {
        let lines: Vec<String> = (0..60_000).map(|i| format!("line {i:08}")).collect();
        let input = json!({
            "exit_code": 0,
            "lines": lines,
            "status": "ok",
            "stdout": "x".repeat(1 << 20),
        });
        assert!(json_len(&input) > 1 << 20);
        let out = Sanitizer::default().value(input);
        assert!(
            json_len(&out) <= DEFAULT_MAX_PAYLOAD_BYTES,
            "{}",
            json_len(&out)
        );
        assert_eq!(out["truncated"], true);
        assert_eq!(out["exit_code"], 0);
        assert_eq!(out["status"], "ok");
        assert!(out.get("lines").is_none());
        let stdout = out["stdout"].as_str().expect("kept, cut");
        assert_eq!(stdout, format!("{}…", "x".repeat(DEFAULT_MAX_STRING_BYTES)));
    }

    #[test]
    fn cap_skips_an_entry_that_overflows_but_keeps_later_ones_that_fit() {
        let s = sanitizer(1000, 100);
        // `,"a":"x…60"` is 67 bytes: 18 + 67 = 85 fits; "b" would overflow; `,"c":1` (6) fits.
        let input = json!({"a": "x".repeat(60), "b": "y".repeat(60), "c": 1, "truncated": false});
        let out = s.value(input);
        assert_eq!(out, json!({"a": "x".repeat(60), "c": 1, "truncated": true}));
        assert_eq!(json_len(&out), 91);
    }

    #[test]
    fn caps_a_non_object_into_a_preview() {
        let input = Value::from((0..100_000).collect::<Vec<u32>>());
        let out = Sanitizer::default().value(input);
        assert_eq!(out["truncated"], true);
        let preview = out["preview"].as_str().expect("preview");
        assert!(preview.starts_with("[0,1,2,3,"));
        assert!(preview.ends_with('…'));
        assert_eq!(preview.len(), DEFAULT_MAX_STRING_BYTES + '…'.len_utf8());
        assert_eq!(out.as_object().map(Map::len), Some(2));
    }

    #[test]
    fn text_parses_json_and_sanitizes_it() {
        let s = Sanitizer::default();
        assert_eq!(
            s.text(r#"{"api_key": "sk-1", "n": [1, 2]}"#),
            json!({"api_key": REDACTED, "n": [1, 2]})
        );
        assert_eq!(s.text("42"), json!(42));
        assert_eq!(s.text(r#""quoted""#), json!("quoted"));
    }

    #[test]
    fn non_json_text_becomes_a_cut_string() {
        let s = sanitizer(10, 1000);
        assert_eq!(s.text("hello"), json!("hello"));
        assert_eq!(s.text("hello world, long"), json!("hello worl…"));
        assert_eq!(s.text(""), json!(""));
        assert_eq!(s.text("said \"hi"), json!("said \"hi"));
    }

    #[test]
    fn malformed_json_text_is_still_redacted() {
        let s = Sanitizer::default();
        for text in [
            r#"{"api_key": "sk-SECRET", "query": "#,
            r#"{"query": "x", "token": {"a": "sk-SECRET"#,
            r#"Error: bad args {"password": sk-SECRET}"#,
        ] {
            let out = s.text_as_string(text);
            assert!(!out.contains("sk-SECRET"), "{out}");
            assert!(out.contains(REDACTED), "{out}");
            let Value::String(out) = s.text(text) else {
                panic!("non-JSON text stays a string");
            };
            assert!(!out.contains("sk-SECRET"), "{out}");
        }
    }

    #[test]
    fn text_as_string_round_trips() {
        let s = sanitizer(16, 1000);
        // Compact JSON with short strings comes back byte for byte (key order is kept).
        for text in [
            r#"{"a":1,"b":[true,null,"x"],"c":{"d":"é😀"}}"#,
            "[]",
            "3.5",
            r#""s""#,
        ] {
            assert_eq!(s.text_as_string(text), text);
        }
        // Other JSON comes back compact and sanitized.
        assert_eq!(
            s.text_as_string("{ \"token\" : 1 ,\n \"q\" : \"0123456789abcdefXYZ\" }"),
            r#"{"token":"[REDACTED]","q":"0123456789abcdef…"}"#
        );
        // Non-JSON stays itself, cut.
        assert_eq!(s.text_as_string("plain text"), "plain text");
        assert_eq!(s.text_as_string("0123456789abcdefXYZ"), "0123456789abcdef…");
        // The output of a JSON text parses to `text`'s value.
        let text = r#"{"password":"p","z":"é"}"#;
        assert_eq!(parse(&s.text_as_string(text)), s.text(text));
    }

    #[test]
    fn streaming_emits_non_secret_text_immediately() {
        let s = Sanitizer::default();
        let mut r = s.streaming();
        assert_eq!(r.push(r#"{"que"#), r#"{"que"#);
        assert_eq!(r.push(r#"ry":"hel"#), r#"ry":"hel"#);
        assert_eq!(r.push(r#"lo\"#), r#"lo\"#);
        assert_eq!(r.push(r#"u00e9","api_k"#), r#"u00e9","api_k"#);
        assert_eq!(r.push(r#"ey": "sk-"#), r#"ey": "[REDACTED]""#);
        assert_eq!(r.push(r#"123\"}"#), "");
        assert_eq!(r.push(r#"", "n": 12"#), r#", "n": 12"#);
        assert_eq!(r.push("3}"), "3}");
        assert_eq!(r.finish(), "");
        let total = r#"{"query":"hello\u00e9","api_key": "[REDACTED]", "n": 123}"#;
        assert_eq!(r.emitted_bytes(), total.len());
        assert_eq!(
            parse(total),
            json!({"query": "helloé", "api_key": REDACTED, "n": 123})
        );
    }

    #[test]
    fn streaming_redacts_values_of_every_type() {
        let s = Sanitizer::default();
        let text = r#"{"token": 12.5e3, "secret": true, "password": null,
            "api_key": {"a": "}", "b": ["]", {"c": "\"{"}]}, "cookie": [[1], {"x": [2]}],
            "after": "kept"}"#;
        let out = stream_char_by_char(&s, text);
        assert_eq!(out, stream(&s, text, &[]));
        assert_eq!(
            parse(&out),
            json!({"token": REDACTED, "secret": REDACTED, "password": REDACTED,
                   "api_key": REDACTED, "cookie": REDACTED, "after": "kept"})
        );
    }

    #[test]
    fn streaming_decodes_key_escapes_before_matching() {
        let s = escape_sensitive_sanitizer();
        let text = r#"{"api\u005fkey":"a","\ud83d\ude00token":"b","qu\"ery":"c","\u0070ass\/word\n":"d","k\u00e9y":"e","\u0070assword\n":"f","x\ud83d\ude00":"g","line\nbreak":"h","line\\nbreak":"i"}"#;
        let out = stream_char_by_char(&s, text);
        assert_eq!(parse(&out), redact_only(&s, parse(text)));
        assert_eq!(
            parse(&out),
            json!({"api_key": REDACTED, "😀token": REDACTED, "qu\"ery": "c",
                   "pass/word\n": "d", "kéy": "e", "password\n": REDACTED,
                   "x😀": REDACTED, "line\nbreak": REDACTED, "line\\nbreak": "i"})
        );
    }

    #[test]
    fn streaming_handles_invalid_json_without_leaking() {
        let s = Sanitizer::default();
        for (text, secret) in [
            (r#"{"api_key" "SECRET"}"#, "SECRET"),
            (r#"{"api_key":"a" "SECRET"}"#, "SECRET"),
            (r#"{"api_key"::"SECRET"}"#, "SECRET"),
            (r#"{"api_key":SECRET,"q":1}"#, "SECRET"),
            (r#"{"api_key":12SECRET"x,y"}"#, "SECRET"),
            (r#"{"api_key":{"a":"SECRET"]]]] tail"#, "SECRET"),
            (r#"{"api_key":"\u12SECRET"}"#, "SECRET"),
            ("]]]}}}{\"token\":\"SECRET", "SECRET"),
        ] {
            let out = stream_char_by_char(&s, text);
            assert!(!out.contains(secret), "{text} -> {out}");
            assert_eq!(out, stream(&s, text, &[]));
        }
    }

    fn arb_key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "api_key",
            "Authorization",
            "token",
            "password",
            "query",
            "nested",
            "X-Api-Key",
            "accessToken",
            "cookie",
            "set-cookie",
            "name",
            "k\"ey",
            "pass\\word",
            "clé 😀",
            "clé",
            "line\nbreak",
            "",
        ])
        .prop_map(str::to_owned)
    }

    fn arb_string() -> impl Strategy<Value = String> {
        let c = prop_oneof![
            4 => prop::char::range('a', 'z'),
            1 => prop::sample::select(vec!['"', '\\', '/', 'é', '😀', '\n', '\u{1}', '\u{2028}', '{', '}', '[', ']', ':', ',', ' ']),
            1 => any::<char>(),
        ];
        prop::collection::vec(c, 0..12).prop_map(|chars| chars.into_iter().collect())
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            arb_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((arb_key(), inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// Text in which JSON's structural characters and escapes are frequent.
    fn arb_garbage() -> impl Strategy<Value = String> {
        let c = prop_oneof![
            3 => prop::sample::select(vec!['{', '}', '[', ']', '"', ':', ',', '\\', ' ', '\n', 'u', '0', 'd', 'e', '8', 'a', 't', 'n', '1', '-', '.', 'é', '😀']),
            1 => any::<char>(),
        ];
        prop::collection::vec(c, 0..40).prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #[test]
        fn streaming_is_split_invariant_and_equals_redact_only(
            value in arb_json(),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let s = escape_sensitive_sanitizer();
            let mut escaped = String::new();
            escaped_json(&value, &mut escaped);
            let pretty = serde_json::to_string_pretty(&value).expect("serializable");
            for text in [value.to_string(), pretty, escaped] {
                let want = redact_only(&s, parse(&text));
                let whole = stream(&s, &text, &[]);
                prop_assert_eq!(parse(&whole), want);
                prop_assert_eq!(&stream(&s, &text, &boundaries(&text, &picks)), &whole);
                prop_assert_eq!(&stream_char_by_char(&s, &text), &whole);
            }
        }

        #[test]
        fn value_output_respects_the_limits(
            value in arb_json(),
            max_string in 0usize..24,
            max_payload in 0usize..400,
        ) {
            let s = sanitizer(max_string, max_payload);
            let out = s.value(value);
            assert_no_secret(&s, &out);
            let len = json_len(&out);
            let is_preview = out.get(PREVIEW_KEY).is_some() && out.as_object().map(Map::len) == Some(2);
            if len > max_payload {
                prop_assert_eq!(&out[TRUNCATED_KEY], &Value::Bool(true));
                prop_assert!(is_preview || len <= max_payload.max(MARKER_BYTES), "{len}");
            }
            let mut strings = Vec::new();
            all_strings(&out, &mut strings);
            for text in strings {
                prop_assert!(text == REDACTED || text.len() <= max_string + '…'.len_utf8());
            }
        }

        #[test]
        fn streaming_never_panics_and_is_split_invariant_on_any_text(
            text in prop_oneof![arb_garbage(), any::<String>()],
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let s = Sanitizer::default();
            let whole = stream(&s, &text, &[]);
            prop_assert_eq!(&stream(&s, &text, &boundaries(&text, &picks)), &whole);
            prop_assert_eq!(&stream_char_by_char(&s, &text), &whole);
            // Whatever it is, `text` survives the whole-payload path without panicking too.
            let _ = s.text(&text);
        }

        #[test]
        fn streaming_never_leaks_a_secret_followed_by_garbage(
            prefix in prop::sample::select(vec![
                r#"{"api_key":"SECRETVALUE""#,
                r#"{"api_key":"SECRETVALUE"#,
                r#"{"api_key":SECRETVALUE"#,
                r#"{"api_key": {"inner": ["SECRETVALUE""#,
                r#"[{"x":1},{"Authorization":"Bearer SECRETVALUE""#,
                r#"{"password" "SECRETVALUE""#,
                r#"{"token":"x\"SECRETVALUE""#,
                r#"{"api\u005fkey":"SECRETVALUE""#,
                r#"{"nested":{"secret":["a",{"b":"SECRETVALUE""#,
            ]),
            garbage in arb_garbage().prop_filter("no S, so no secret of its own", |g| !g.contains('S')),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let s = Sanitizer::default();
            let text = format!("{prefix}{garbage}");
            let out = stream(&s, &text, &boundaries(&text, &picks));
            prop_assert!(!out.contains("SECRETVALUE"), "{} -> {}", text, out);
            prop_assert!(!s.text_as_string(&text).contains("SECRETVALUE"));
        }
    }
}
