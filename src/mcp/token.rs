//! toolpulse's own MCP progress tokens: `tp-` and 128 random bits in hex, from the OS. They are
//! unguessable, so no one else can make notifications that toolpulse takes for its calls', and
//! unique without coordination between replicas.

use std::fmt::Write;

use serde_json::Value;

const PREFIX: &str = "tp-";
const RANDOM_BYTES: usize = 16;

/// A new token, never given out before.
pub fn new() -> String {
    let mut random = [0u8; RANDOM_BYTES];
    getrandom::fill(&mut random).expect("the OS random source is available");
    let mut token = String::with_capacity(PREFIX.len() + 2 * RANDOM_BYTES);
    token.push_str(PREFIX);
    for byte in random {
        let _ = write!(token, "{byte:02x}");
    }
    token
}

/// Whether `token` has the form of toolpulse's tokens. A notification for such a token that
/// toolpulse no longer follows is still not forwarded: the gateway never saw that token.
pub fn looks_ours(token: &Value) -> bool {
    token.as_str().is_some_and(|t| {
        t.strip_prefix(PREFIX).is_some_and(|hex| {
            hex.len() == 2 * RANDOM_BYTES
                && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_and_recognized() {
        let (a, b) = (new(), new());
        assert_ne!(a, b);
        assert_eq!(a.len(), 35);
        assert!(looks_ours(&Value::String(a)));
        for other in [
            Value::from(1),
            Value::from("tp-1"),
            Value::from("progress-1"),
            Value::from(format!("tp-{}", "G".repeat(32))),
        ] {
            assert!(!looks_ours(&other), "{other}");
        }
    }
}
