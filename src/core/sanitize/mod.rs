//! Sanitizing of the payloads some event profiles carry (tool arguments and tool results) before
//! they reach a client.
//!
//! [`Sanitizer`] ([`payload`]) works on whole payloads: it redacts the values of secret-looking
//! keys, cuts long strings and caps the payload's total size. [`PartialRedactor`] ([`partial`])
//! works on JSON text that arrives in pieces (streamed tool arguments) and only redacts; the
//! caller bounds the total.
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
//!
//! Which keys are secret, and what their values become, is [`secret`]'s, shared by both.

pub mod partial;
pub mod payload;
pub mod secret;

pub use partial::PartialRedactor;
pub use payload::{DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_STRING_BYTES, Sanitizer};
pub use secret::{DEFAULT_REDACT_PATTERNS, REDACTED};
