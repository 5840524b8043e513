//! What a request head and a response head share, written once for both roles: the limits a
//! head is read within, httparse's verdict over them, the header fields taken into a
//! `HeaderMap`, the fields that frame a body (`Content-Length`, `Transfer-Encoding`) and keep a
//! connection open (`Connection`), read as hyper reads them, the blank line that ends a head,
//! and the fields written out.

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Version};

/// A response head longer than this is refused: it bounds what the connection buffers before
/// the body, and no gateway sends heads near it (hyper's client allows ~400 KiB, its whole read
/// buffer). A listener that sets no limit of its own reads request heads up to it too.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// More header fields than this are refused; hyper's default (its client's and its server's),
/// so nothing hyper reads is lost.
pub const MAX_HEADERS: usize = 100;

/// The largest Content-Length taken: hyper keeps the two values above it for its own markers
/// (chunked, close-delimited) and refuses them, so toolpulse does too.
pub const MAX_CONTENT_LENGTH: u64 = u64::MAX - 2;

/// Why a head is refused before either role looks at it; each role words it as its own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// No blank line within the limit.
    TooLarge,
    /// More than [`MAX_HEADERS`] fields.
    TooManyHeaders,
    Malformed(httparse::Error),
}

/// Runs httparse (`parse`, over the slots of [`MAX_HEADERS`] fields) on the first `max_bytes`
/// of `buf`, so that the outcome does not depend on how much the caller happened to read beyond
/// them. The head's length with its blank line, or `None` while it is incomplete.
pub fn scan<'b>(
    buf: &'b [u8],
    max_bytes: usize,
    parse: impl FnOnce(&'b [u8]) -> httparse::Result<usize>,
) -> Result<Option<usize>, Syntax> {
    let window = &buf[..buf.len().min(max_bytes)];
    match parse(window) {
        Ok(httparse::Status::Complete(len)) => Ok(Some(len)),
        Ok(httparse::Status::Partial) if window.len() >= max_bytes => Err(Syntax::TooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(Syntax::TooManyHeaders),
        Err(e) => Err(Syntax::Malformed(e)),
    }
}

/// A header field the `http` types refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldError {
    Name,
    Value,
}

/// Room for the fields the proxy adds to a head it read before it forwards it (`X-Forwarded-*`
/// and `Accept-Encoding` to a request, `Cache-Control` and `X-Accel-Buffering` to a response):
/// a map that has to grow for them rebuilds its table.
const ADDED_FIELDS: usize = 4;

/// The fields in order, repeated names appended. httparse has checked the bytes already; the
/// `http` types check them again rather than trust that the two agree.
///
/// The values are copied into one buffer, each a slice of it: two allocations for a head's
/// values (the buffer, and its count of users once it has two), not one per value. The buffer
/// lives as long as the longest-lived value: the head's own, at most [`MAX_HEAD_BYTES`].
pub fn header_map(fields: &[httparse::Header<'_>]) -> Result<HeaderMap, FieldError> {
    let mut headers = HeaderMap::with_capacity(fields.len() + ADDED_FIELDS);
    let mut values = Vec::with_capacity(fields.iter().map(|f| f.value.len()).sum());
    for field in fields {
        values.extend_from_slice(field.value);
    }
    let mut values = Bytes::from(values);
    for field in fields {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| FieldError::Name)?;
        let value = values.split_to(field.value.len());
        let value = HeaderValue::from_maybe_shared(value).map_err(|_| FieldError::Value)?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// Whether `chunked` is the last coding of the last `Transfer-Encoding` field, read exactly as
/// hyper reads it (anything else means reading to the close, in both).
pub fn final_coding_is_chunked(headers: &HeaderMap) -> bool {
    let Some(last) = headers.get_all(TRANSFER_ENCODING).iter().next_back() else {
        return false;
    };
    // The usual field, `chunked` alone, without the search for the last coding.
    if last.as_bytes().eq_ignore_ascii_case(b"chunked") {
        return true;
    }
    let Ok(text) = last.to_str() else {
        return false;
    };
    text.rsplit(',')
        .next()
        .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"))
}

/// The one length every `Content-Length` field gives (each a list of values where `lists`,
/// as hyper's client reads them; else one value, as hyper's server does); `None` when they
/// differ or one is not a plain decimal number.
pub fn content_length(headers: &HeaderMap, lists: bool) -> Option<u64> {
    let mut length = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        // The usual field, digits alone, read as they are: no list, nothing to trim.
        if value.as_bytes().iter().all(u8::is_ascii_digit) {
            let n = decimal(value.as_bytes())?;
            if length.is_some_and(|l| l != n) {
                return None;
            }
            length = Some(n);
            continue;
        }
        let text = value.to_str().ok()?;
        if !lists && text.contains(',') {
            return None;
        }
        for element in text.split(',') {
            let n = decimal(element.trim().as_bytes())?;
            if length.is_some_and(|l| l != n) {
                return None;
            }
            length = Some(n);
        }
    }
    length.filter(|&n| n <= MAX_CONTENT_LENGTH)
}

/// Digits only: `u64::from_str` would take a `+` sign.
fn decimal(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u64, |n, &b| {
        let digit = u64::from(b.checked_sub(b'0').filter(|d| *d <= 9)?);
        n.checked_mul(10)?.checked_add(digit)
    })
}

/// HTTP/1.1 stays open unless told `close`; HTTP/1.0 closes unless told `keep-alive`. A
/// `close` in any `Connection` field wins over a `keep-alive` in another.
pub fn keep_alive(version: Version, headers: &HeaderMap) -> bool {
    let has = |token: &str| {
        headers.get_all(CONNECTION).iter().any(|value| {
            value.to_str().is_ok_and(|text| {
                text.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    if has("close") {
        return false;
    }
    version == Version::HTTP_11 || has("keep-alive")
}

/// Whether `buf` has a blank line (`\n\n` or `\n\r\n`) that is not all in `buf[..searched]`:
/// a head is parsed only once its blank line is in (one dripped a byte at a time would
/// otherwise be parsed from its start at every byte), and each read searches only what it
/// added.
pub fn has_blank_line(buf: &[u8], searched: usize) -> bool {
    let from = searched.saturating_sub(2).min(buf.len());
    memchr::memchr_iter(b'\n', &buf[from..]).any(|at| {
        let rest = &buf[from + at + 1..];
        rest.starts_with(b"\n") || rest.starts_with(b"\r\n")
    })
}

/// The bytes [`put_fields`] writes for `headers`.
pub fn fields_len(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum()
}

/// Writes each field as `name: value` CRLF, in order.
pub fn put_fields(out: &mut BytesMut, headers: &HeaderMap) {
    for (name, value) in headers {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::has_blank_line;

    #[test]
    fn a_blank_line_is_found_across_reads() {
        let head = b"HTTP/1.1 200 OK\r\nx: y\r\n\r\n";
        // Every way the head can have come in two reads finds the blank line only at its end.
        for cut in 0..head.len() {
            let first = has_blank_line(&head[..cut], 0);
            assert!(!first, "{cut}");
            assert!(has_blank_line(head, cut), "{cut}");
        }
        assert!(has_blank_line(b"HTTP/1.0 200 OK\n\n", 0));
        assert!(!has_blank_line(b"HTTP/1.1 200 OK\r\nx: y\r\n", 0));
    }
}
