//! A client's request head: the request line and header fields (with `httparse`), and from them
//! how the body is framed (RFC 9112 §6.3), whether the connection stays open after the
//! exchange, and whether the client waits for `100 Continue`.
//!
//! As strict as hyper 1's server (`proto/h1/role.rs`, `Server::parse`). A request with both
//! `Transfer-Encoding` and `Content-Length` is read as hyper reads it, by the former alone, its
//! length dropped and its connection closed after the answer (RFC 9112 §6.1): what a smuggler
//! hid behind the length never becomes a request.

use http::header::{CONTENT_LENGTH, EXPECT, TRANSFER_ENCODING};
use http::{HeaderMap, Method, StatusCode, Uri, Version, request};

use crate::net::upstream::h1::head::{
    content_length, final_coding_is_chunked, header_map, keep_alive,
};

/// More header fields than this are refused (431); hyper's default.
pub const MAX_HEADERS: usize = 100;

/// A request target longer than this is refused (414): the longest the `http` crate takes.
pub const MAX_URI_BYTES: usize = (u16::MAX - 1) as usize;

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Exactly this many bytes; `Length(0)` for a request without a body.
    Length(u64),
    Chunked,
}

/// A request head, ready for the handler.
#[derive(Debug)]
pub struct Head {
    pub parts: request::Parts,
    pub framing: Framing,
    /// The connection may carry another request after this exchange.
    pub keep_alive: bool,
    /// The client waits for `100 Continue` before it sends the body.
    pub expect_continue: bool,
}

/// What [`parse`] found at the start of the buffer.
#[derive(Debug)]
pub enum Parsed {
    /// No complete head yet: read more and parse again.
    Partial,
    /// A head of `len` bytes, blank line included; the body starts right after.
    Complete { head: Box<Head>, len: usize },
}

/// Why a request head is refused; the connection is answered [`HeadError::status`] and closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is over the listener's limit")]
    TooLarge,
    #[error("the request head has more than 100 header fields")]
    TooManyHeaders,
    #[error("the request head is malformed ({0})")]
    Malformed(httparse::Error),
    #[error("the request target is too long")]
    UriTooLong,
    #[error("the request target is not a valid URI")]
    InvalidUri,
    #[error("the request has an invalid header field")]
    InvalidHeader,
    #[error("the HTTP/1.0 request has a Transfer-Encoding, which HTTP/1.0 lacks")]
    TransferEncodingOnHttp10,
    #[error("the request's Transfer-Encoding does not end in chunked")]
    NotChunked,
    #[error("the request's Content-Length is not one valid decimal number")]
    InvalidContentLength,
    #[error("the chunked request's Content-Length is not one valid decimal number")]
    InvalidLengthBesideChunked,
}

impl HeadError {
    /// The status the client is answered with, as hyper's server answers it.
    pub fn status(self) -> StatusCode {
        match self {
            HeadError::TooLarge | HeadError::TooManyHeaders => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            HeadError::UriTooLong => StatusCode::URI_TOO_LONG,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// Parses the request head at the start of `buf`; a head of `max_bytes` or more is refused.
pub fn parse(buf: &[u8], max_bytes: usize) -> Result<Parsed, HeadError> {
    // Only the first max_bytes are looked at, so the outcome does not depend on how much the
    // caller happened to read beyond them.
    let window = &buf[..buf.len().min(max_bytes)];
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut slots);
    let len = match request.parse(window) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if window.len() >= max_bytes => {
            return Err(HeadError::TooLarge);
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
        Err(e) => return Err(HeadError::Malformed(e)),
    };
    let method = request.method.unwrap_or_default();
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| HeadError::Malformed(httparse::Error::Token))?;
    let target = request.path.unwrap_or_default();
    if target.len() > MAX_URI_BYTES {
        return Err(HeadError::UriTooLong);
    }
    let uri = target.parse::<Uri>().map_err(|_| HeadError::InvalidUri)?;
    let version = match request.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let mut headers = header_map(request.headers).map_err(|_| HeadError::InvalidHeader)?;
    let framing = framing(version, &headers)?;
    // Both framings (RFC 9112 §6.1): read as Transfer-Encoding says, the length dropped, and
    // the connection closed after the answer, so nothing hidden behind the length is a request.
    let both = framing == Framing::Chunked && headers.contains_key(CONTENT_LENGTH);
    if both {
        headers.remove(CONTENT_LENGTH);
    }
    // Repeated equal lengths are one (as hyper keeps them): the gateway gets one field.
    if let Framing::Length(n) = framing
        && headers.get_all(CONTENT_LENGTH).iter().nth(1).is_some()
    {
        headers.insert(CONTENT_LENGTH, n.into());
    }
    let keep_alive = !both && keep_alive(version, &headers);
    let expect_continue = version == Version::HTTP_11
        && headers
            .get(EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = version;
    parts.headers = headers;
    let head = Box::new(Head {
        parts,
        framing,
        keep_alive,
        expect_continue,
    });
    Ok(Parsed::Complete { head, len })
}

/// RFC 9112 §6.3 for a request: chunked, a length, or no body.
fn framing(version: Version, headers: &HeaderMap) -> Result<Framing, HeadError> {
    if headers.contains_key(TRANSFER_ENCODING) {
        if version == Version::HTTP_10 {
            return Err(HeadError::TransferEncodingOnHttp10);
        }
        // A request body's length must be known (§6.3 rule 4): no reading to the close.
        if !final_coding_is_chunked(headers) {
            return Err(HeadError::NotChunked);
        }
        // The length is dropped, but one that is not a length is refused: hyper's server
        // refuses it when it comes before Transfer-Encoding, toolpulse wherever it comes.
        if headers.contains_key(CONTENT_LENGTH) && content_length(headers, false).is_none() {
            return Err(HeadError::InvalidLengthBesideChunked);
        }
        return Ok(Framing::Chunked);
    }
    if headers.contains_key(CONTENT_LENGTH) {
        // One value per field, as hyper's server reads it: a list (`3, 3`) is refused.
        return content_length(headers, false)
            .map(Framing::Length)
            .ok_or(HeadError::InvalidContentLength);
    }
    Ok(Framing::Length(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 16 * 1024;

    fn complete(raw: &str) -> (Box<Head>, usize) {
        match parse(raw.as_bytes(), LIMIT) {
            Ok(Parsed::Complete { head, len }) => (head, len),
            other => panic!("{raw:?}: {other:?}"),
        }
    }

    fn refused(raw: &str) -> HeadError {
        match parse(raw.as_bytes(), LIMIT) {
            Err(e) => e,
            other => panic!("{raw:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn a_post_with_a_length_and_where_its_body_starts() {
        let raw = "POST /v1/responses?x=1 HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello";
        let (head, len) = complete(raw);
        assert_eq!(&raw[len..], "hello");
        assert_eq!(head.parts.method, Method::POST);
        assert_eq!(head.parts.uri, "/v1/responses?x=1");
        assert_eq!(head.parts.version, Version::HTTP_11);
        assert_eq!(head.framing, Framing::Length(5));
        assert!(head.keep_alive);
        assert!(!head.expect_continue);
        let values: Vec<_> = head.parts.headers.get_all("x-a").iter().collect();
        assert_eq!(values, ["1", "2"]);
    }

    #[test]
    fn partial_until_the_blank_line_then_refused_at_the_limit() {
        let raw = b"GET / HTTP/1.1\r\nHost: gw\r\n\r\n";
        for end in 0..raw.len() {
            let parsed = parse(&raw[..end], LIMIT);
            assert!(matches!(parsed, Ok(Parsed::Partial)), "{end}");
        }
        let long = format!("GET / HTTP/1.1\r\nx: {}\r\n", "a".repeat(LIMIT));
        assert_eq!(refused(&long), HeadError::TooLarge);
        assert_eq!(HeadError::TooLarge.status(), 431);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: 1\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(refused(&many), HeadError::TooManyHeaders);
    }

    #[test]
    fn framing_as_rfc_9112_says_and_smuggling_shapes_refused() {
        let chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert_eq!(complete(chunked).0.framing, Framing::Chunked);
        assert_eq!(
            complete("GET / HTTP/1.1\r\n\r\n").0.framing,
            Framing::Length(0)
        );
        let same = "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n";
        let (head, _) = complete(same);
        assert_eq!(head.framing, Framing::Length(3));
        let lengths = head.parts.headers.get_all(CONTENT_LENGTH).iter().count();
        assert_eq!(lengths, 1, "repeated equal lengths are one");
        let both = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
        let (head, _) = complete(both);
        assert_eq!(head.framing, Framing::Chunked);
        assert!(
            !head.parts.headers.contains_key(CONTENT_LENGTH),
            "the length is dropped"
        );
        assert!(!head.keep_alive, "and the connection closed after");
        for (raw, error) in [
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                HeadError::NotChunked,
            ),
            (
                "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
                HeadError::TransferEncodingOnHttp10,
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
                HeadError::InvalidContentLength,
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
                HeadError::InvalidContentLength,
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n",
                HeadError::InvalidContentLength,
            ),
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: x\r\n\r\n",
                HeadError::InvalidLengthBesideChunked,
            ),
        ] {
            assert_eq!(refused(raw), error, "{raw:?}");
            assert_eq!(error.status(), 400);
        }
    }

    #[test]
    fn malformed_heads_are_refused() {
        for raw in [
            "GET / HTTP/1.1\r\nx: a\r\n folded\r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "G(T / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nbad name: x\r\n\r\n",
        ] {
            assert!(
                matches!(refused(raw), HeadError::Malformed(_)),
                "{raw:?}: {:?}",
                parse(raw.as_bytes(), LIMIT)
            );
        }
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_URI_BYTES));
        assert_eq!(
            parse(long.as_bytes(), 1 << 20).err(),
            Some(HeadError::UriTooLong)
        );
    }

    #[test]
    fn keep_alive_and_expect_continue() {
        let close = "GET / HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n";
        assert!(!complete(close).0.keep_alive);
        assert!(!complete("GET / HTTP/1.0\r\n\r\n").0.keep_alive);
        let kept = "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
        assert!(complete(kept).0.keep_alive);
        let expect = "POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n";
        assert!(complete(expect).0.expect_continue);
        let old = "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n";
        assert!(!complete(old).0.expect_continue, "HTTP/1.0 has no 100");
    }
}
