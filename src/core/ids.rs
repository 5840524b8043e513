//! The ids toolpulse gives its own items, so that it knows them again in a later request.
//!
//! A companion item (profile `openai`) is `tp_` + the call id.
//!
//! A hosted item (profile `hosted`) is `tph_` + the gateway's `call_id` (base64url) + `.` + the
//! stream's nonce (8 bytes) and an HMAC-SHA256 of both under the deployment's key (its first 16
//! bytes), the 24 bytes in base64url (32 characters: every hosted event carries the id, so it is
//! kept short). Only a holder of the key can make an id that names a call, so a client cannot
//! name another user's call by guessing its id; the nonce makes the ids of two streams differ
//! even where a gateway reuses call ids (many number them per response), so the store, keyed by
//! the whole id, never hands one user's pair to another; and a verified id gives back the
//! `call_id` without a lookup (a restart loses nothing for items that carry their own content).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::core::lifecycle::track::MAX_ID_BYTES as MAX_TRACKED_ID_BYTES;

/// The prefix of companion item ids: toolpulse recognizes its own items by it.
pub const COMPANION_PREFIX: &str = "tp_";

/// The prefix of hosted item ids (distinct from the companions' `tp_`).
pub const PREFIX: &str = "tph_";

/// Bytes of the MAC kept in an id: 128 bits.
const MAC_BYTES: usize = 16;

/// The longest `call_id` put in an id; a longer one gets no hosted item (ids stay short). The
/// tracker follows no longer call id either.
pub const MAX_CALL_ID_BYTES: usize = MAX_TRACKED_ID_BYTES;

/// The nonce and the MAC, in base64url.
const TAIL_CHARS: usize = (8 + MAC_BYTES) * 4 / 3;

/// The longest hosted id: the prefix, the longest call id in base64url, the nonce and the MAC.
pub const MAX_ID_BYTES: usize = PREFIX.len() + (MAX_CALL_ID_BYTES * 4).div_ceil(3) + 1 + TAIL_CHARS;

/// A key for hosted ids. Its `Debug` never shows it.
#[derive(Clone)]
pub struct Key {
    secret: Vec<u8>,
    /// HMAC keyed with it, before any message: cloned per id, so the key's padding is hashed
    /// once per key, not once per id (half the hashing of a short id).
    keyed: std::sync::Arc<Hmac<Sha256>>,
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.secret == other.secret
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key([REDACTED])")
    }
}

impl Key {
    pub fn new(secret: &[u8]) -> Key {
        // `new_from_slice` takes keys of any length for HMAC.
        let keyed = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        Key {
            secret: secret.to_vec(),
            keyed: std::sync::Arc::new(keyed),
        }
    }

    /// The key's bytes (to share it with the other replicas through Redis).
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The HMAC keyed with it, for a digest of something else than an id (such a digest
    /// starts with a label of its own, so it never meets an id's MAC).
    pub(crate) fn hmac(&self) -> Hmac<Sha256> {
        Hmac::clone(&self.keyed)
    }

    fn mac(&self, call_id: &str, nonce: u64) -> [u8; MAC_BYTES] {
        let mut mac = Hmac::clone(&self.keyed);
        mac.update(&nonce.to_be_bytes());
        mac.update(call_id.as_bytes());
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; MAC_BYTES];
        out.copy_from_slice(&full[..MAC_BYTES]);
        out
    }

    /// The hosted item id for `call_id` in the stream with `nonce`.
    pub fn id_for(&self, call_id: &str, nonce: u64) -> String {
        let mut id = String::with_capacity(PREFIX.len() + call_id.len() * 4 / 3 + 4 + TAIL_CHARS);
        id.push_str(PREFIX);
        URL_SAFE_NO_PAD.encode_string(call_id, &mut id);
        id.push('.');
        let mut tail = [0u8; 8 + MAC_BYTES];
        tail[..8].copy_from_slice(&nonce.to_be_bytes());
        tail[8..].copy_from_slice(&self.mac(call_id, nonce));
        URL_SAFE_NO_PAD.encode_string(tail, &mut id);
        id
    }

    /// The `call_id` an id names, when it is one this key made; `None` otherwise (not ours, or
    /// made under another key).
    pub fn verify(&self, id: &str) -> Option<String> {
        let rest = id.strip_prefix(PREFIX)?;
        let (encoded, tail) = rest.split_once('.')?;
        if encoded.len() > MAX_CALL_ID_BYTES * 4 / 3 + 4 || tail.len() != TAIL_CHARS {
            return None;
        }
        let call_id = String::from_utf8(URL_SAFE_NO_PAD.decode(encoded).ok()?).ok()?;
        let mut bytes = [0u8; 8 + MAC_BYTES];
        // Exactly 24 bytes: a 32-character tail decodes to no more, and to no fewer.
        if URL_SAFE_NO_PAD.decode_slice(tail, &mut bytes).ok()? != bytes.len() {
            return None;
        }
        let (nonce, given) = bytes.split_at(8);
        let nonce = u64::from_be_bytes(nonce.try_into().ok()?);
        let expected = self.mac(&call_id, nonce);
        // Constant time, as MACs are compared.
        let diff = expected
            .iter()
            .zip(given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        (diff == 0).then_some(call_id)
    }
}

/// The `call_id` an id carries, read without the key: for an item whose id does not verify
/// (made before a restart under another key), so that a pair built from its own content keeps
/// the gateway's call id. Not a proof of anything: only what the item itself says.
pub fn carried_call_id(id: &str) -> Option<String> {
    let rest = id.strip_prefix(PREFIX)?;
    let (encoded, tail) = rest.split_once('.')?;
    if encoded.is_empty()
        || encoded.len() > MAX_CALL_ID_BYTES * 4 / 3 + 4
        || tail.len() != TAIL_CHARS
    {
        return None;
    }
    String::from_utf8(URL_SAFE_NO_PAD.decode(encoded).ok()?).ok()
}

/// Whether `id` has the shape of a hosted id (verified or not).
pub fn is_hosted(id: &str) -> bool {
    id.starts_with(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_verify_under_their_key_only() {
        let key = Key::new(b"deployment secret");
        let id = key.id_for("call_web_1", 7);
        assert!(id.starts_with("tph_"));
        assert_eq!(key.verify(&id).as_deref(), Some("call_web_1"));
        assert_eq!(Key::new(b"another").verify(&id), None);
        assert_eq!(key.id_for("call_web_1", 7), id, "stable");
        assert_ne!(key.id_for("call_web_2", 7), id);
        assert_ne!(
            key.id_for("call_web_1", 8),
            id,
            "another stream, another id"
        );
        let other_stream = key.id_for("call_web_1", 8);
        assert_eq!(key.verify(&other_stream).as_deref(), Some("call_web_1"));
    }

    #[test]
    fn forged_and_malformed_ids_do_not_verify() {
        let key = Key::new(b"k");
        let id = key.id_for("call_1", 1);
        let (head, tail) = id.rsplit_once('.').expect("a dot");
        assert_eq!(tail.len(), 32, "{id}");
        let other = key.id_for("call_2", 1);
        let other_tail = other.rsplit_once('.').expect("a dot").1;
        let another_nonce = key.id_for("call_1", 2);
        let another_nonce = another_nonce.rsplit_once('.').expect("a dot").1;
        // The nonce of one id with the MAC of another.
        let spliced = format!("{head}.{}{}", &another_nonce[..11], &tail[11..]);
        let flipped = {
            let mut t = tail.as_bytes().to_vec();
            t[20] = if t[20] == b'A' { b'B' } else { b'A' };
            format!("{head}.{}", String::from_utf8(t).expect("ascii"))
        };
        for forged in [
            format!("{head}.{other_tail}"),
            format!("{head}.{}", "A".repeat(32)),
            format!("{head}.{}", &tail[..30]),
            format!("{head}.{tail}A"),
            // (A tail without lowercase letters stays the same: then "x", which fails too.)
            format!("{head}.{}", tail.to_uppercase()).replace(&id, "x"),
            format!("{head}.{}+", &tail[..31]),
            spliced,
            flipped,
            format!("tp_{}", &id[4..]),
            "tph_..".into(),
            "tph_".into(),
            format!("tph_{}.{tail}", "A".repeat(1000)),
        ] {
            assert_eq!(key.verify(&forged), None, "{forged}");
        }
    }

    #[test]
    fn the_call_id_is_readable_without_the_key() {
        let key = Key::new(b"a key of sixteen bytes");
        let id = key.id_for("call_7", 3);
        assert_eq!(carried_call_id(&id).as_deref(), Some("call_7"));
        assert_eq!(carried_call_id("tph_.x"), None);
        assert_eq!(carried_call_id("fc_1"), None);
    }

    #[test]
    fn a_key_never_shows() {
        assert_eq!(format!("{:?}", Key::new(b"secret")), "Key([REDACTED])");
    }
}
