//! The server's side of HTTP/1.1: a client's request head read (the request line and header
//! fields, with `httparse`), and from it how the body is framed (RFC 9112 §6.3), whether the
//! connection stays open after the exchange, and whether the client waits for `100 Continue`;
//! and the response head written, its body's framing decided as hyper's server decides it.
//!
//! As strict as hyper 1's server (`proto/h1/role.rs`, `Server::parse`). A request with both
//! `Transfer-Encoding` and `Content-Length` is read as hyper reads it, by the former alone, its
//! length dropped and its connection closed after the answer (RFC 9112 §6.1): what a smuggler
//! hid behind the length never becomes a request.
//!
//! A response is framed as `Server::encode` frames it: no body for `HEAD`, 1xx, 204 and 304; a
//! `Content-Length` the response has is kept; a body known to be empty or of known size gets
//! one; any other is chunked, or on HTTP/1.0 runs to the close.

use bytes::{BufMut, BytesMut};
use http::header::{self, CONTENT_LENGTH, EXPECT, HeaderValue, TRANSFER_ENCODING};
use http::{HeaderMap, Method, StatusCode, Uri, Version, request, response};

use super::head::{self, MAX_HEADERS, Syntax};
use super::{Framing, Known};

/// A request target longer than this is refused (414): the longest the `http` crate takes.
pub const MAX_URI_BYTES: usize = (u16::MAX - 1) as usize;

/// What an HTTP/1.1 client that sent `Expect: 100-continue` waits for.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// A request head, ready for the handler.
#[derive(Debug)]
pub struct Head {
    pub parts: request::Parts,
    /// `Length` (`Length(0)` without a body) or `Chunked`: a request's length is always known.
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

impl From<Syntax> for HeadError {
    fn from(syntax: Syntax) -> HeadError {
        match syntax {
            Syntax::TooLarge => HeadError::TooLarge,
            Syntax::TooManyHeaders => HeadError::TooManyHeaders,
            Syntax::Malformed(e) => HeadError::Malformed(e),
        }
    }
}

/// Parses the request head at the start of `buf`; a head of `max_bytes` or more is refused.
pub fn parse(buf: &[u8], max_bytes: usize) -> Result<Parsed, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut slots);
    let Some(len) = head::scan(buf, max_bytes, |window| request.parse(window))? else {
        return Ok(Parsed::Partial);
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
    let mut headers = head::header_map(request.headers).map_err(|_| HeadError::InvalidHeader)?;
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
    let keep_alive = !both && head::keep_alive(version, &headers);
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
        if !head::final_coding_is_chunked(headers) {
            return Err(HeadError::NotChunked);
        }
        // The length is dropped, but one that is not a length is refused: hyper's server
        // refuses it when it comes before Transfer-Encoding, toolpulse wherever it comes.
        if headers.contains_key(CONTENT_LENGTH) && head::content_length(headers, false).is_none() {
            return Err(HeadError::InvalidLengthBesideChunked);
        }
        return Ok(Framing::Chunked);
    }
    if headers.contains_key(CONTENT_LENGTH) {
        // One value per field, as hyper's server reads it: a list (`3, 3`) is refused.
        return head::content_length(headers, false)
            .map(Framing::Length)
            .ok_or(HeadError::InvalidContentLength);
    }
    Ok(Framing::Length(0))
}

/// What the response head depends on in its request.
#[derive(Debug, Clone)]
pub struct Asked {
    pub method: Method,
    pub version: Version,
}

/// Frames the response, fixing its framing and connection fields, and returns its head's bytes,
/// its framing, and whether the connection stays open after it (`keep_alive` as the request
/// and the connection allow, and as the framing does). `date` is the `Date` value it gets when
/// it has none (the caller owns the clock).
pub fn encode(
    head: &mut response::Parts,
    asked: &Asked,
    body: Known,
    keep_alive: bool,
    date: &[u8],
) -> (BytesMut, Framing, bool) {
    let headers = &mut head.headers;
    headers.remove(header::TRANSFER_ENCODING);
    headers.remove(header::CONNECTION);
    let no_body = asked.method == Method::HEAD
        || head.status.is_informational()
        || head.status == StatusCode::NO_CONTENT
        || head.status == StatusCode::NOT_MODIFIED;
    let declared = headers.contains_key(header::CONTENT_LENGTH);
    let declared = declared
        .then(|| head::content_length(headers, true))
        .flatten();
    let framing = if no_body {
        Framing::Nothing
    } else if let Some(length) = declared {
        Framing::Length(length)
    } else {
        // A Content-Length that is not one number is replaced by the framing chosen here.
        headers.remove(header::CONTENT_LENGTH);
        let length = if body.empty { Some(0) } else { body.length };
        match length {
            Some(length) => {
                headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
                Framing::Length(length)
            }
            None if asked.version == Version::HTTP_11 => {
                let chunked = HeaderValue::from_static("chunked");
                headers.insert(header::TRANSFER_ENCODING, chunked);
                Framing::Chunked
            }
            None => Framing::Close,
        }
    };
    let keep_alive = keep_alive && framing != Framing::Close;
    if !keep_alive {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    } else if asked.version == Version::HTTP_10 {
        let kept = HeaderValue::from_static("keep-alive");
        headers.insert(header::CONNECTION, kept);
    }
    // "HTTP/1.1 200 " and the longest reason, "date: " and its value, the CRLFs.
    let mut out = BytesMut::with_capacity(64 + head::fields_len(headers) + 40);
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(head.status.as_str().as_bytes());
    out.put_u8(b' ');
    let reason = head.status.canonical_reason().unwrap_or("");
    out.put_slice(reason.as_bytes());
    out.put_slice(b"\r\n");
    head::put_fields(&mut out, headers);
    if !headers.contains_key(header::DATE) {
        out.put_slice(b"date: ");
        out.put_slice(date);
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
    (out, framing, keep_alive)
}

/// The head of a response the server makes itself: a refused head, whose connection then
/// closes.
pub fn refusal(status: StatusCode, date: &[u8]) -> BytesMut {
    let (mut head, ()) = http::Response::new(()).into_parts();
    head.status = status;
    let asked = Asked {
        method: Method::GET,
        version: Version::HTTP_11,
    };
    let empty = Known {
        empty: true,
        length: Some(0),
    };
    encode(&mut head, &asked, empty, false, date).0
}

#[cfg(test)]
mod tests;
