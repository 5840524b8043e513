//! The client's side of HTTP/1.1: the upstream's response head read (status line and header
//! fields, with `httparse`), and from it how the body is framed (RFC 9112 §6.3) and whether the
//! connection may be reused; and the request head written, its body's framing decided as
//! hyper's client decides it.
//!
//! At least as strict as hyper 1's client (`proto/h1/role.rs`, `Client::parse` and
//! `Client::decoder`), and stricter where a proxy must not guess: a response with both
//! `Transfer-Encoding` and `Content-Length` is refused (hyper follows `Transfer-Encoding`), and
//! so is `101 Switching Protocols` (toolpulse never asks to upgrade).

use bytes::{BufMut, BytesMut};
use http::header::{self, CONTENT_LENGTH, HeaderValue, TRANSFER_ENCODING};
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode, Version};

use super::head::{self, FieldError, MAX_HEAD_BYTES, MAX_HEADERS, Syntax};
use super::{Framing, Known};

/// A final (non-1xx) response head.
#[derive(Debug, Clone)]
pub struct Head {
    pub status: StatusCode,
    pub version: Version,
    /// In the order received; a repeated field keeps every value.
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The connection may carry another request once this body is read.
    pub keep_alive: bool,
}

/// What [`parse`] found at the start of the buffer.
#[derive(Debug)]
pub enum Parsed {
    /// No complete head yet: read more and parse again.
    Partial,
    /// An interim response (1xx other than 101) of `len` bytes, blank line included: skip it
    /// and parse again after it.
    Informational { len: usize },
    /// The final head, `len` bytes long with its blank line; the body starts right after.
    Final { head: Head, len: usize },
}

/// Why a response head is refused. Each is final: the connection cannot be used further.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the upstream's response head is over 64 KiB")]
    TooLarge,
    #[error("the upstream's response head has more than 100 header fields")]
    TooManyHeaders,
    #[error("the upstream's response head is malformed ({0})")]
    Malformed(httparse::Error),
    #[error("the upstream's response has an invalid status code {0}")]
    InvalidStatus(u16),
    #[error("the upstream's response is not HTTP/1.0 or HTTP/1.1")]
    UnsupportedVersion,
    #[error("the upstream's response has an invalid header field name")]
    InvalidHeaderName,
    #[error("the upstream's response has an invalid header field value")]
    InvalidHeaderValue,
    #[error("the upstream switched protocols (101), which toolpulse never asks for")]
    SwitchingProtocols,
    #[error("the upstream's HTTP/1.0 response has a Transfer-Encoding, which HTTP/1.0 lacks")]
    TransferEncodingOnHttp10,
    #[error("the upstream's response has both Transfer-Encoding and Content-Length")]
    LengthAndTransferEncoding,
    #[error("the upstream's Content-Length is not one valid decimal number")]
    InvalidContentLength,
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

impl From<FieldError> for HeadError {
    fn from(field: FieldError) -> HeadError {
        match field {
            FieldError::Name => HeadError::InvalidHeaderName,
            FieldError::Value => HeadError::InvalidHeaderValue,
        }
    }
}

/// Parses the response head at the start of `buf`, the answer to a `method` request.
pub fn parse(buf: &[u8], method: &Method) -> Result<Parsed, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut slots);
    let Some(len) = head::scan(buf, MAX_HEAD_BYTES, |window| response.parse(window))? else {
        return Ok(Parsed::Partial);
    };
    let code = response.code.unwrap_or(0);
    let status = StatusCode::from_u16(code).map_err(|_| HeadError::InvalidStatus(code))?;
    let version = match response.version {
        Some(0) => Version::HTTP_10,
        Some(1) => Version::HTTP_11,
        _ => return Err(HeadError::UnsupportedVersion),
    };
    let mut headers = head::header_map(response.headers)?;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(HeadError::SwitchingProtocols);
    }
    if status.is_informational() {
        return Ok(Parsed::Informational { len });
    }
    let framing = framing(status, version, &headers, method)?;
    one_length(&mut headers);
    let keep_alive = framing != Framing::Close && head::keep_alive(version, &headers);
    let head = Head {
        status,
        version,
        headers,
        framing,
        keep_alive,
    };
    Ok(Parsed::Final { head, len })
}

/// RFC 9112 §6.3, in its order, for a final response.
fn framing(
    status: StatusCode,
    version: Version,
    headers: &HeaderMap,
    method: &Method,
) -> Result<Framing, HeadError> {
    // Rule 1: never a body, whatever the fields say.
    if method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Nothing);
    }
    if headers.contains_key(TRANSFER_ENCODING) {
        if version == Version::HTTP_10 {
            return Err(HeadError::TransferEncodingOnHttp10);
        }
        // Rule 3 says this "ought to be handled as an error": either reading may be the one a
        // smuggler counted on, and a proxy must not pick.
        if headers.contains_key(CONTENT_LENGTH) {
            return Err(HeadError::LengthAndTransferEncoding);
        }
        return Ok(if head::final_coding_is_chunked(headers) {
            Framing::Chunked
        } else {
            Framing::Close
        });
    }
    if headers.contains_key(CONTENT_LENGTH) {
        return head::content_length(headers, true)
            .map(Framing::Length)
            .ok_or(HeadError::InvalidContentLength);
    }
    Ok(Framing::Close)
}

/// Repeated equal lengths (`2, 2`, or two fields) become one field, as nginx would send them
/// if it did not refuse them: a client must not get a length its own parser may refuse or
/// read otherwise. A length that is not one (only kept by a response without a body, which
/// is framed without it) is dropped.
fn one_length(headers: &mut HeaderMap) {
    if !headers.contains_key(CONTENT_LENGTH) {
        return;
    }
    match head::content_length(headers, true) {
        Some(n) => {
            headers.insert(CONTENT_LENGTH, n.into());
        }
        None => {
            headers.remove(CONTENT_LENGTH);
        }
    }
}

/// Decides how a request body is framed, as hyper's client frames it, setting
/// `Content-Length` or `Transfer-Encoding` as it says: a `Content-Length` the request has is
/// kept; a body known to be empty gets no framing; a body of known length gets a
/// `Content-Length`; any other is sent chunked.
pub fn frame(head: &mut Parts, body: Known) -> Framing {
    let declared = head
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(declared) = declared {
        return Framing::Length(declared);
    }
    if body.empty {
        return Framing::Length(0);
    }
    if let Some(length) = body.length {
        head.headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        return Framing::Length(length);
    }
    head.headers.insert(
        header::TRANSFER_ENCODING,
        HeaderValue::from_static("chunked"),
    );
    Framing::Chunked
}

/// The request line and the header fields, `HTTP/1.1`, the target in origin form, in one
/// buffer.
pub fn encode(head: &Parts) -> BytesMut {
    let target = head.uri.path_and_query().map_or("/", |p| p.as_str());
    let fields = head::fields_len(&head.headers);
    let mut out = BytesMut::with_capacity(head.method.as_str().len() + target.len() + 13 + fields);
    out.put_slice(head.method.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(target.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    head::put_fields(&mut out, &head.headers);
    out.put_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests;
