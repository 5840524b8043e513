//! Finds hosted item ids this deployment signed in a request body that is too large to be read
//! whole and mapped: such a body must not reach the gateway, which never made those items
//! (docs/hosted.md, "Bodies over the read limit"). Fed the body piece by piece, in bounded
//! memory: only the last [`id::MAX_ID_BYTES`] bytes are kept between pieces, so an id split
//! across pieces is found too. Only ids that verify under the key count: a JSON string that
//! merely starts with `tph_` does not stop a body.

use memchr::memmem;

use super::id::{self, Key};

/// The start of a JSON string holding a hosted id.
const MARKER: &[u8] = b"\"tph_";

/// Scans one body.
pub struct SignedIdScan {
    key: Key,
    /// The last bytes seen, where an id that continues in the next piece begins.
    tail: Vec<u8>,
    found: bool,
}

impl SignedIdScan {
    pub fn new(key: Key) -> Self {
        SignedIdScan {
            key,
            tail: Vec::with_capacity(id::MAX_ID_BYTES + MARKER.len()),
            found: false,
        }
    }

    /// Whether a signed id was seen so far (including in `piece`).
    pub fn feed(&mut self, piece: &[u8]) -> bool {
        if self.found {
            return true;
        }
        let keep = id::MAX_ID_BYTES + MARKER.len();
        // Ids that begin in the tail: searched in the tail joined with the piece's start.
        if !self.tail.is_empty() {
            let mut joined = std::mem::take(&mut self.tail);
            let tail_len = joined.len();
            joined.extend_from_slice(&piece[..piece.len().min(keep)]);
            self.found = memmem::find_iter(&joined, MARKER)
                .take_while(|&at| at < tail_len)
                .any(|at| self.signed_at(&joined, at));
            joined.truncate(tail_len);
            self.tail = joined;
        }
        self.found =
            self.found || memmem::find_iter(piece, MARKER).any(|at| self.signed_at(piece, at));
        let tail = &mut self.tail;
        if piece.len() >= keep {
            tail.clear();
            tail.extend_from_slice(&piece[piece.len() - keep..]);
        } else {
            tail.extend_from_slice(piece);
            let excess = tail.len().saturating_sub(keep);
            tail.drain(..excess);
        }
        self.found
    }

    /// Whether the string that starts at `at` (its opening quote) is complete in `bytes` and a
    /// signed id.
    fn signed_at(&self, bytes: &[u8], at: usize) -> bool {
        let start = at + 1;
        let end = bytes.len().min(start + id::MAX_ID_BYTES + 1);
        let Some(length) = memchr::memchr(b'"', &bytes[start..end]) else {
            return false;
        };
        std::str::from_utf8(&bytes[start..start + length])
            .is_ok_and(|text| self.key.verify(text).is_some())
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
        for size in [1, 2, 3, 5, 64, 397, 400, 401, 1000, body.len()] {
            assert!(scan_in_pieces(body.as_bytes(), &key, size), "{size}");
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
            assert!(scan.tail.len() <= id::MAX_ID_BYTES + MARKER.len());
        }
    }
}
