//! What toolpulse writes to Redis, as data: the digest of a call's arguments, the member that
//! names an open call (its owner), the replica channels and the messages on them. Key names
//! themselves are built in the bus's Lua scripts, the only code that touches the registry's
//! keys, so their layout lives in one place.
//!
//! Invariants: argument values never appear in clear (only [`args_digest`]); every key and
//! channel starts with the configured prefix; a message carries only what delivery needs.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::features::progress::{Progress, TraceId};

/// Names and call ids longer than this are not registered (a gateway's are tens of bytes;
/// this keeps a hostile upstream from writing large keys).
pub const MAX_ID_BYTES: usize = 256;
/// Messages larger than this are ignored by the subscriber, and never published.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;
/// A report's message is cut to this many bytes before it is published (an MCP server's may be
/// far longer): twice what a client sees of it by default (`[sanitize] max_string_bytes`), and
/// small enough that, JSON-escaped at worst six bytes to one, the message stays within
/// [`MAX_MESSAGE_BYTES`].
pub const MAX_REPORT_MESSAGE_BYTES: usize = 4096;
/// The digest of arguments that are not JSON: never equal to a real digest (hex only), so such
/// a call matches by name alone, as in the in-process registry.
pub const NO_ARGUMENTS: &str = "-";

/// The arguments' digest: SHA-256 over the prefix and the canonical JSON text (object keys
/// sorted at every depth, no whitespace), first 128 bits in hex. Equal JSON values, whatever
/// their key order or spacing, get equal digests.
pub fn args_digest(prefix: &str, arguments: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prefix.as_bytes());
    hasher.update([0]);
    hasher.update(canonical_json(arguments).as_bytes());
    let digest = hasher.finalize();
    hex(&digest[..16])
}

/// The JSON text of `value` with object keys sorted (serde_json keeps insertion order here,
/// since the crate is built with `preserve_order`).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A trace id as the scripts key it; empty for none.
pub fn trace_hex(trace: Option<TraceId>) -> String {
    trace.map_or_else(String::new, |t| hex(&t.0))
}

/// The channel a replica listens on.
pub fn replica_channel(prefix: &str, replica: &str) -> String {
    format!("{prefix}:replica:{replica}")
}

/// Whether a name or call id may go into the registry.
pub fn registrable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_BYTES
}

/// An open call, as the registry names it: `replica|stream|call_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub replica: String,
    pub stream: u64,
    pub call_id: String,
}

impl Owner {
    pub fn member(&self) -> String {
        format!("{}|{}|{}", self.replica, self.stream, self.call_id)
    }

    /// Reads a member; the call id is the rest, so it may itself contain `|`.
    pub fn parse(member: &str) -> Option<Owner> {
        let mut parts = member.splitn(3, '|');
        let replica = parts.next().filter(|r| !r.is_empty())?;
        let stream = parts.next()?.parse().ok()?;
        let call_id = parts.next().filter(|c| !c.is_empty())?;
        Some(Owner {
            replica: replica.to_string(),
            stream,
            call_id: call_id.to_string(),
        })
    }
}

/// A message on a replica's channel. Ids travel as decimal strings: Lua numbers are doubles,
/// which would round ids above 2^53.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase")]
pub enum Message {
    /// A report for an open call of one of this replica's streams.
    Progress {
        stream: String,
        call: String,
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A waiting binding of this replica found its call (written by the register script).
    One { binding: String, to: String },
    /// A waiting binding of this replica matched calls in two or more streams.
    Ambiguous { binding: String },
}

impl Message {
    pub fn progress(owner: &Owner, report: Progress) -> Message {
        let message = report.message.map(|mut m| {
            if m.len() > MAX_REPORT_MESSAGE_BYTES {
                let mut end = MAX_REPORT_MESSAGE_BYTES;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
                m.push('…');
            }
            m
        });
        Message::Progress {
            stream: owner.stream.to_string(),
            call: owner.call_id.clone(),
            progress: report.progress,
            total: report.total,
            message,
        }
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a message is plain JSON data")
    }

    pub fn decode(payload: &[u8]) -> Option<Message> {
        if payload.len() > MAX_MESSAGE_BYTES {
            return None;
        }
        serde_json::from_slice(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn equal_json_values_get_equal_digests_and_no_value_in_clear() {
        let a: Value = serde_json::from_str(
            r#"{"q": "paris", "n": 1, "o": {"b": [1, {"y": 2, "x": 1}], "a": null}}"#,
        )
        .expect("json");
        let b: Value =
            serde_json::from_str(r#"{"o":{"a":null,"b":[1,{"x":1,"y":2}]},"n":1,"q":"paris"}"#)
                .expect("json");
        assert_eq!(
            canonical_json(&a),
            r#"{"n":1,"o":{"a":null,"b":[1,{"x":1,"y":2}]},"q":"paris"}"#
        );
        let digest = args_digest("toolpulse", &a);
        assert_eq!(digest, args_digest("toolpulse", &b));
        assert_eq!(digest.len(), 32);
        assert!(digest.bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(!digest.contains("paris"));
        assert_ne!(digest, args_digest("other", &a), "the prefix salts it");
        for different in [
            json!({"q": "paris", "n": 1.0}),
            json!({"q": "paris"}),
            json!(["q"]),
        ] {
            assert_ne!(args_digest("toolpulse", &different), digest, "{different}");
        }
        // Keys are JSON-escaped, so a key with a quote cannot forge another structure.
        let tricky = json!({"a\",\"b": 1});
        assert_eq!(canonical_json(&tricky), r#"{"a\",\"b":1}"#);
    }

    #[test]
    fn owners_round_trip_with_a_pipe_in_the_call_id() {
        let owner = Owner {
            replica: "0123abcd".into(),
            stream: 42,
            call_id: "call|x".into(),
        };
        assert_eq!(owner.member(), "0123abcd|42|call|x");
        assert_eq!(Owner::parse(&owner.member()), Some(owner));
        for bad in ["", "r", "r|x|c", "|1|c", "r|1|", "r|1"] {
            assert_eq!(Owner::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn messages_encode_and_decode() {
        let owner = Owner {
            replica: "r".into(),
            stream: u64::MAX,
            call_id: "call_1".into(),
        };
        let report = Progress {
            progress: 2.0,
            total: Some(5.0),
            message: Some("step\r\n2".into()),
        };
        let message = Message::progress(&owner, report);
        let text = message.encode();
        assert!(
            text.contains(r#""stream":"18446744073709551615""#),
            "{text}"
        );
        assert_eq!(Message::decode(text.as_bytes()), Some(message));
        // As the Lua script writes them (cjson).
        let one = Message::decode(br#"{"k":"one","binding":"7","to":"r|1|c"}"#);
        assert_eq!(
            one,
            Some(Message::One {
                binding: "7".into(),
                to: "r|1|c".into()
            })
        );
        let ambiguous = Message::decode(br#"{"binding":"8","k":"ambiguous"}"#);
        assert_eq!(
            ambiguous,
            Some(Message::Ambiguous {
                binding: "8".into()
            })
        );
        assert_eq!(Message::decode(br#"{"k":"other"}"#), None);
        let big = format!(
            r#"{{"k":"ambiguous","binding":"{}"}}"#,
            "1".repeat(MAX_MESSAGE_BYTES)
        );
        assert_eq!(Message::decode(big.as_bytes()), None);
    }

    #[test]
    fn a_long_report_is_cut_to_fit_a_message() {
        let owner = Owner::parse("r1|7|call_1").expect("an owner");
        // Control characters: six bytes each once JSON-escaped.
        let long = "\u{1}é".repeat(MAX_MESSAGE_BYTES);
        let report = Progress {
            progress: 1.0,
            total: None,
            message: Some(long),
        };
        let payload = Message::progress(&owner, report).encode();
        assert!(payload.len() <= MAX_MESSAGE_BYTES, "{}", payload.len());
        let Some(Message::Progress { message, .. }) = Message::decode(payload.as_bytes()) else {
            panic!("decoded")
        };
        let message = message.expect("a message");
        assert!(message.ends_with('…') && message.len() <= MAX_REPORT_MESSAGE_BYTES + 3);
    }

    #[test]
    fn trace_ids_and_channels() {
        assert_eq!(trace_hex(None), "");
        assert_eq!(trace_hex(Some(TraceId([0xab; 16]))), "ab".repeat(16));
        assert_eq!(replica_channel("tp", "r1"), "tp:replica:r1");
        assert!(registrable("call_1"));
        assert!(!registrable(""));
        assert!(!registrable(&"x".repeat(MAX_ID_BYTES + 1)));
    }
}
