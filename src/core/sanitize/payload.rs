//! Sanitizing of whole payloads ([`Sanitizer`]): the values of secret keys redacted, long
//! strings cut, the payload's total size capped.

use serde_json::{Map, Value};

use super::partial::PartialRedactor;
use super::secret::{REDACTED, SecretKeys};

pub const DEFAULT_MAX_STRING_BYTES: usize = 2048;
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 8192;

const ELLIPSIS: char = '…';
const TRUNCATED_KEY: &str = "truncated";
const PREVIEW_KEY: &str = "preview";
/// The smallest capped object: the marker alone. A cap below this is exceeded by the marker.
const MARKER_BYTES: usize = r#"{"truncated":true}"#.len();

/// Redaction, string cutting and a size cap for whole payloads.
#[derive(Debug, Clone)]
pub struct Sanitizer {
    /// Shared with every [`PartialRedactor`] so starting one per tool call costs no compile.
    secret_keys: SecretKeys,
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
        Ok(Sanitizer {
            secret_keys: SecretKeys::new(patterns)?,
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
        PartialRedactor::new(self.secret_keys.clone())
    }

    fn is_secret(&self, key: &str) -> bool {
        self.secret_keys.is_secret(key)
    }

    /// The cap on one payload's JSON, in bytes.
    pub fn max_payload_bytes(&self) -> usize {
        self.max_payload_bytes
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
        let patterns: Vec<String> = super::secret::DEFAULT_REDACT_PATTERNS
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

#[cfg(test)]
mod streaming_tests;
#[cfg(test)]
mod tests;
