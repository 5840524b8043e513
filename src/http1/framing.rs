//! How a message body is delimited, and what a body to be sent says of itself: the one
//! framing both roles decide and the decoder and encoder follow.

/// How a message body is delimited (RFC 9112 §6). Each role decides it from a head, as it
/// reads one or as it writes one; `decode::Decoder` reads a body by it, and the connection
/// code writes one by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body, whatever the head says: a response to `HEAD`, a 1xx, a 204 or a 304.
    Nothing,
    /// Exactly this many bytes; `Length(0)` for an empty body (a request without framing
    /// fields has one).
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Everything up to the connection's close (a response's body only).
    Close,
}

/// What a body to be sent says of itself before it is read: each role frames it by this
/// (`server::encode`, `client::frame`).
#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub empty: bool,
    pub length: Option<u64>,
}
