//! toolpulse's own MCP progress tokens: `tp-` and 128 random bits in hex, from the OS. They are
//! unguessable, so no one else can make notifications that toolpulse takes for its calls', and
//! unique without coordination between replicas. A token is toolpulse's because toolpulse gave
//! it ([`super::calls`]), never because of its shape: a gateway's token may look the same.

use std::fmt::Write;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_and_unguessable() {
        let (a, b) = (new(), new());
        assert_ne!(a, b);
        assert_eq!(a.len(), 35);
        let hex = a.strip_prefix("tp-").expect("prefixed");
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
