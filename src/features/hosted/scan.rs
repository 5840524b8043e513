//! Finds hosted item ids this deployment signed in a request body that is too large to be read
//! whole and mapped: such a body must not reach the gateway, which never made those items
//! (docs/hosted.md, "Bodies over the read limit"). Fed the body piece by piece, in bounded
//! memory: only the last [`KEEP`] bytes are kept between pieces, so an id split across pieces
//! is found too. An id may be written with JSON escapes (`\u0074ph_…`), as any JSON reader
//! decodes it: every string is read as the gateway would read it, but given up at its first
//! character that an id cannot have, so the scan stays linear. Only ids that verify under the
//! key count: a JSON string that merely starts with `tph_` does not stop a body.

use memchr::memchr_iter;

use super::id::{self, Key};

/// The longest JSON string that can hold an id: every character escaped (`\uXXXX`), and its
/// closing quote.
const KEEP: usize = 6 * id::MAX_ID_BYTES + 2;

/// Scans one body.
pub struct SignedIdScan {
    key: Key,
    /// The last bytes seen, where an id that continues in the next piece begins.
    tail: Vec<u8>,
    found: bool,
}

/// What a JSON string that starts at a quote holds.
enum Candidate {
    /// Not a hosted id (or not one that verifies).
    No,
    /// The string goes on past the bytes at hand.
    Incomplete,
    Id(String),
}

impl SignedIdScan {
    pub fn new(key: Key) -> Self {
        SignedIdScan {
            key,
            tail: Vec::with_capacity(KEEP),
            found: false,
        }
    }

    /// Whether a signed id was seen so far (including in `piece`).
    pub fn feed(&mut self, piece: &[u8]) -> bool {
        if self.found {
            return true;
        }
        // Strings that begin in the tail: read in the tail joined with the piece's start.
        if !self.tail.is_empty() {
            let mut joined = std::mem::take(&mut self.tail);
            let tail_len = joined.len();
            joined.extend_from_slice(&piece[..piece.len().min(KEEP)]);
            self.found = memchr_iter(b'"', &joined)
                .take_while(|&at| at < tail_len)
                .any(|at| self.signed_at(&joined, at));
            joined.truncate(tail_len);
            self.tail = joined;
        }
        self.found = self.found || memchr_iter(b'"', piece).any(|at| self.signed_at(piece, at));
        let tail = &mut self.tail;
        if piece.len() >= KEEP {
            tail.clear();
            tail.extend_from_slice(&piece[piece.len() - KEEP..]);
        } else {
            tail.extend_from_slice(piece);
            let excess = tail.len().saturating_sub(KEEP);
            tail.drain(..excess);
        }
        self.found
    }

    /// Whether the string that starts at `at` (its opening quote) is complete in `bytes` and a
    /// signed id.
    fn signed_at(&self, bytes: &[u8], at: usize) -> bool {
        match candidate(bytes, at + 1) {
            Candidate::Id(text) => self.key.verify(&text).is_some(),
            Candidate::No | Candidate::Incomplete => false,
        }
    }
}

/// Reads the JSON string whose text starts at `start`, as far as it can be a hosted id.
fn candidate(bytes: &[u8], start: usize) -> Candidate {
    let prefix = id::PREFIX.as_bytes();
    let mut text = String::new();
    let mut at = start;
    loop {
        let Some(&byte) = bytes.get(at) else {
            return Candidate::Incomplete;
        };
        let (c, width) = match byte {
            b'"' if text.len() > prefix.len() => return Candidate::Id(text),
            b'"' => return Candidate::No,
            b'\\' => match bytes.get(at + 1) {
                None => return Candidate::Incomplete,
                Some(b'u') => {
                    let Some(hex) = bytes.get(at + 2..at + 6) else {
                        return Candidate::Incomplete;
                    };
                    let code = std::str::from_utf8(hex)
                        .ok()
                        .and_then(|h| u32::from_str_radix(h, 16).ok());
                    match code.and_then(char::from_u32) {
                        Some(c) => (c, 6),
                        None => return Candidate::No,
                    }
                }
                Some(b'/') => ('/', 2),
                // Quotes, backslashes and control characters are not in ids.
                Some(_) => return Candidate::No,
            },
            byte => (char::from(byte), 1),
        };
        let fits = match prefix.get(text.len()) {
            Some(&expected) => c == char::from(expected),
            None => c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'),
        };
        if !fits || text.len() >= id::MAX_ID_BYTES {
            return Candidate::No;
        }
        text.push(c);
        at += width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_pieces(body: &[u8], key: &Key, size: usize) -> bool {
        let mut scan = SignedIdScan::new(key.clone());
        body.chunks(size).any(|piece| scan.feed(piece))
    }

    #[test]
    fn finds_signed_ids_however_the_body_is_split() {
        let key = Key::new(b"a key of sixteen bytes");
        let id = key.id_for("call_1", 3);
        let filler = "x".repeat(3000);
        let body = format!(r#"{{"input":[{{"type":"mcp_call","id":"{id}"}},"{filler}"]}}"#);
        let forged = body.replace(&id[id.len() - 4..], "0000");
        let unrelated = format!(r#"{{"input":"tph_ is a prefix","x":"{filler}","y":"tph_abc"}}"#);
        // Every character of the id escaped, or only its prefix's `t`.
        let all_escaped: String = id.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let escaped = body.replace(&id, &all_escaped);
        let t_escaped = body.replace("\"tph_", "\"\\u0074ph_");
        assert_ne!(t_escaped, body);
        for size in [1, 2, 3, 5, 64, 397, 400, 401, 1000, 2500, body.len()] {
            assert!(scan_in_pieces(body.as_bytes(), &key, size), "{size}");
            assert!(scan_in_pieces(escaped.as_bytes(), &key, size), "{size}");
            assert!(scan_in_pieces(t_escaped.as_bytes(), &key, size), "{size}");
            assert!(!scan_in_pieces(forged.as_bytes(), &key, size), "{size}");
            assert!(!scan_in_pieces(unrelated.as_bytes(), &key, size), "{size}");
            let other = Key::new(b"another key of 16 bytes");
            assert!(!scan_in_pieces(body.as_bytes(), &other, size), "{size}");
        }
    }

    #[test]
    fn keeps_a_bounded_tail() {
        let key = Key::new(b"a key of sixteen bytes");
        let mut scan = SignedIdScan::new(key);
        for _ in 0..1000 {
            scan.feed(&[b'a'; 777]);
            assert!(scan.tail.len() <= KEEP);
        }
    }
}
