//! Who a stored pair belongs to ([`Owner`]), and the hosted item ids the core mints (re-exported
//! from [`crate::core::ids`], where they are made and verified without I/O).

use hmac::Mac;

pub use crate::core::ids::{
    Key, MAX_CALL_ID_BYTES, MAX_ID_BYTES, PREFIX, carried_call_id, is_hosted,
};

/// Whose request a stored pair answers: a digest of the caller's credentials (`Authorization`
/// and `api-key`, each as given, or absent), keyed by the deployment's key so that Redis holds
/// nothing a credential can be guessed from. Requests without either share one owner.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Owner([u8; 16]);

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Owner({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

impl Owner {
    /// The owner of requests that hold no credentials (tests, a gateway without auth).
    pub const ANONYMOUS: Owner = Owner([0; 16]);

    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    pub fn from_bytes(bytes: [u8; 16]) -> Owner {
        Owner(bytes)
    }
}

impl Owner {
    /// The owner of a request with these credentials (header values as sent), under `key`.
    pub fn of(key: &Key, authorization: Option<&[u8]>, api_key: Option<&[u8]>) -> Owner {
        if authorization.is_none() && api_key.is_none() {
            return Owner::ANONYMOUS;
        }
        let mut mac = key.hmac();
        // A message no id's MAC can have: ids start with an 8-byte nonce, then the call id;
        // this starts with a label and lengths.
        mac.update(b"\0toolpulse owner\0");
        for value in [authorization, api_key] {
            match value {
                Some(value) => {
                    mac.update(&(value.len() as u64 + 1).to_be_bytes());
                    mac.update(value);
                }
                None => mac.update(&0u64.to_be_bytes()),
            }
        }
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        // Never the anonymous owner: a credential's pairs must not match a request without one.
        if out == [0; 16] {
            out[0] = 1;
        }
        Owner(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_differ_by_credentials() {
        let key = Key::new(b"a key of sixteen bytes");
        let a = Owner::of(&key, Some(b"Bearer a"), None);
        assert_eq!(a, Owner::of(&key, Some(b"Bearer a"), None));
        assert_ne!(a, Owner::of(&key, Some(b"Bearer b"), None));
        assert_ne!(
            a,
            Owner::of(&key, None, Some(b"Bearer a")),
            "another header"
        );
        let another = Key::new(b"another key of 16 b");
        assert_ne!(a, Owner::of(&another, Some(b"Bearer a"), None));
        assert_eq!(Owner::of(&key, None, None), Owner::ANONYMOUS);
        assert_ne!(Owner::of(&key, Some(b""), None), Owner::ANONYMOUS);
    }
}
