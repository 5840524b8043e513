//! The response on its way to the client: its head in one buffer, and how its body is framed,
//! decided as hyper's server decides it (`proto/h1/role.rs`, `Server::encode`): no body for
//! `HEAD`, 1xx, 204 and 304; a `Content-Length` the response has is kept; a body known to be
//! empty or of known size gets one; any other is chunked, or on HTTP/1.0 runs to the close.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, StatusCode, Version, response};

use crate::net::upstream::h1::head::content_length;

/// How the response body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body is sent, whatever the response holds.
    Nothing,
    /// Exactly this many bytes.
    Length(u64),
    Chunked,
    /// Up to the connection's close.
    Close,
}

/// What the response head depends on in its request.
#[derive(Debug, Clone)]
pub struct Asked {
    pub method: Method,
    pub version: Version,
}

/// What the body says of itself before it is read.
#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub empty: bool,
    pub length: Option<u64>,
}

/// Frames the response, fixing its framing and connection fields, and returns its head's bytes,
/// its framing, and whether the connection stays open after it (`keep_alive` as the request
/// and the connection allow, and as the framing does).
pub fn encode_head(
    head: &mut response::Parts,
    asked: &Asked,
    body: Known,
    keep_alive: bool,
) -> (BytesMut, Framing, bool) {
    let headers = &mut head.headers;
    headers.remove(header::TRANSFER_ENCODING);
    headers.remove(header::CONNECTION);
    let no_body = asked.method == Method::HEAD
        || head.status.is_informational()
        || head.status == StatusCode::NO_CONTENT
        || head.status == StatusCode::NOT_MODIFIED;
    let declared = headers.contains_key(header::CONTENT_LENGTH);
    let declared = declared.then(|| content_length(headers, true)).flatten();
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
    let mut out = BytesMut::with_capacity(head_size(headers));
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(head.status.as_str().as_bytes());
    out.put_u8(b' ');
    let reason = head.status.canonical_reason().unwrap_or("");
    out.put_slice(reason.as_bytes());
    out.put_slice(b"\r\n");
    for (name, value) in headers.iter() {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    if !headers.contains_key(header::DATE) {
        out.put_slice(b"date: ");
        with_date(|date| out.put_slice(date));
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
    (out, framing, keep_alive)
}

/// The head's size, status line and date included.
fn head_size(headers: &HeaderMap) -> usize {
    let fields: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    // "HTTP/1.1 200 " + the longest reason, "date: " + 29 + CRLFs.
    64 + fields + 40
}

/// The head of a response toolpulse's HTTP/1 server makes itself: a refused head, whose
/// connection then closes.
pub fn refusal(status: StatusCode) -> BytesMut {
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
    encode_head(&mut head, &asked, empty, false).0
}

/// A chunk's size line: the size in hex, CRLF.
pub struct ChunkLine {
    bytes: [u8; 18],
    start: usize,
}

impl ChunkLine {
    pub fn new(size: usize) -> ChunkLine {
        let mut bytes = [0u8; 18];
        bytes[16] = b'\r';
        bytes[17] = b'\n';
        let mut start = 16;
        let mut n = size;
        loop {
            start -= 1;
            bytes[start] = b"0123456789abcdef"[n & 0xf];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        ChunkLine { bytes, start }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[self.start..]
    }
}

/// Calls `f` with the current `Date` value (RFC 9110 §5.6.7), formatted once a second per
/// thread, as hyper does.
fn with_date<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    thread_local! {
        static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != second {
            *date = (second, httpdate::fmt_http_date(now));
        }
        f(date.1.as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, fields: &[(&str, &str)]) -> response::Parts {
        let mut response = http::Response::builder().status(status);
        for (name, value) in fields {
            response = response.header(*name, *value);
        }
        response.body(()).expect("response").into_parts().0
    }

    const GET_11: Asked = Asked {
        method: Method::GET,
        version: Version::HTTP_11,
    };
    const STREAM: Known = Known {
        empty: false,
        length: None,
    };

    fn text(out: &BytesMut) -> String {
        String::from_utf8(out.to_vec()).expect("ASCII")
    }

    #[test]
    fn a_stream_is_chunked_with_a_date_and_its_fields_in_order() {
        let mut parts = head(200, &[("content-type", "text/event-stream"), ("x-a", "1")]);
        let (out, framing, keep_alive) = encode_head(&mut parts, &GET_11, STREAM, true);
        let out = text(&out);
        assert_eq!(framing, Framing::Chunked);
        assert!(keep_alive);
        assert!(
            out.starts_with(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-a: 1\r\ntransfer-encoding: chunked\r\ndate: "
            ),
            "{out}"
        );
        assert!(out.ends_with(" GMT\r\n\r\n"), "{out}");
    }

    #[test]
    fn lengths_kept_or_added_and_no_body_where_there_is_none() {
        let mut parts = head(200, &[("content-length", "5")]);
        let (_, framing, _) = encode_head(&mut parts, &GET_11, STREAM, true);
        assert_eq!(framing, Framing::Length(5));
        let known = Known {
            empty: false,
            length: Some(7),
        };
        let mut parts = head(502, &[]);
        let (out, framing, _) = encode_head(&mut parts, &GET_11, known, true);
        assert_eq!(framing, Framing::Length(7));
        assert!(text(&out).contains("content-length: 7\r\n"));
        let head_request = Asked {
            method: Method::HEAD,
            version: Version::HTTP_11,
        };
        let mut parts = head(200, &[("content-length", "5")]);
        let (out, framing, _) = encode_head(&mut parts, &head_request, STREAM, true);
        assert_eq!(framing, Framing::Nothing);
        assert!(
            text(&out).contains("content-length: 5\r\n"),
            "HEAD keeps it"
        );
        let mut parts = head(204, &[]);
        assert_eq!(
            encode_head(&mut parts, &GET_11, STREAM, true).1,
            Framing::Nothing
        );
    }

    #[test]
    fn http_10_streams_run_to_the_close_and_kept_connections_say_so() {
        let old = Asked {
            method: Method::GET,
            version: Version::HTTP_10,
        };
        let mut parts = head(200, &[("transfer-encoding", "chunked")]);
        let (out, framing, keep_alive) = encode_head(&mut parts, &old, STREAM, true);
        assert_eq!(framing, Framing::Close);
        assert!(!keep_alive);
        let out = text(&out);
        assert!(out.contains("connection: close\r\n"), "{out}");
        assert!(!out.contains("transfer-encoding"), "{out}");
        let mut parts = head(200, &[("content-length", "0")]);
        let (out, _, keep_alive) = encode_head(&mut parts, &old, STREAM, true);
        assert!(keep_alive);
        assert!(text(&out).contains("connection: keep-alive\r\n"));
    }

    #[test]
    fn a_refusal_closes() {
        let out = text(&refusal(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
        assert!(out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(
            out.contains("content-length: 0\r\nconnection: close\r\n"),
            "{out}"
        );
    }

    #[test]
    fn chunk_lines_are_hex() {
        assert_eq!(ChunkLine::new(0).as_bytes(), b"0\r\n");
        assert_eq!(ChunkLine::new(255).as_bytes(), b"ff\r\n");
        assert_eq!(ChunkLine::new(65536).as_bytes(), b"10000\r\n");
        let max = format!("{:x}\r\n", usize::MAX);
        assert_eq!(ChunkLine::new(usize::MAX).as_bytes(), max.as_bytes());
    }
}
