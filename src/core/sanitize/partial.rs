//! Redaction of JSON text that arrives in pieces (streamed tool arguments), without waiting for
//! the whole document ([`PartialRedactor`]).

use super::secret::{REDACTED, SecretKeys};

/// Redacts secret-valued keys in JSON text fed in arbitrary pieces, without waiting for the whole
/// document: `push` returns the redacted text for the bytes given so far.
///
/// It is a character-level lexer: everything outside a redacted value is copied as it arrives
/// (a key is copied while it is read and matched when its closing quote arrives, before any of
/// its value can), and a redacted value is replaced by `"[REDACTED]"` at its first character and
/// swallowed to its end. Nothing is held back.
#[derive(Debug, Clone)]
pub struct PartialRedactor {
    secret_keys: SecretKeys,
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
    pub fn new(secret_keys: SecretKeys) -> Self {
        PartialRedactor {
            secret_keys,
            stack: Vec::new(),
            string: None,
            key: String::new(),
            high_surrogate: None,
            skip: None,
            emitted: 0,
        }
    }

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
                    let secret = self.secret_keys.is_secret(&self.key);
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

fn is_json_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}
