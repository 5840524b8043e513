//! The server's side: request heads read (framing, smuggling shapes, limits, keep-alive,
//! `100 Continue`) and response heads written.

use http::header::CONTENT_LENGTH;
use http::{Method, StatusCode, Version, response};

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

fn head(status: u16, fields: &[(&str, &str)]) -> response::Parts {
    let mut response = http::Response::builder().status(status);
    for (name, value) in fields {
        response = response.header(*name, *value);
    }
    response.body(()).expect("response").into_parts().0
}

/// What the caller passes as the `Date` value.
const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

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
    let (out, framing, keep_alive) = encode(&mut parts, &GET_11, STREAM, true, DATE);
    let out = text(&out);
    assert_eq!(framing, Framing::Chunked);
    assert!(keep_alive);
    assert!(
        out.starts_with(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-a: 1\r\ntransfer-encoding: chunked\r\ndate: "
        ),
        "{out}"
    );
    assert!(
        out.ends_with("\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"),
        "{out}"
    );
}

#[test]
fn lengths_kept_or_added_and_no_body_where_there_is_none() {
    let mut parts = head(200, &[("content-length", "5")]);
    let (_, framing, _) = encode(&mut parts, &GET_11, STREAM, true, DATE);
    assert_eq!(framing, Framing::Length(5));
    let known = Known {
        empty: false,
        length: Some(7),
    };
    let mut parts = head(502, &[]);
    let (out, framing, _) = encode(&mut parts, &GET_11, known, true, DATE);
    assert_eq!(framing, Framing::Length(7));
    assert!(text(&out).contains("content-length: 7\r\n"));
    let head_request = Asked {
        method: Method::HEAD,
        version: Version::HTTP_11,
    };
    let mut parts = head(200, &[("content-length", "5")]);
    let (out, framing, _) = encode(&mut parts, &head_request, STREAM, true, DATE);
    assert_eq!(framing, Framing::Nothing);
    assert!(
        text(&out).contains("content-length: 5\r\n"),
        "HEAD keeps it"
    );
    let mut parts = head(204, &[]);
    assert_eq!(
        encode(&mut parts, &GET_11, STREAM, true, DATE).1,
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
    let (out, framing, keep_alive) = encode(&mut parts, &old, STREAM, true, DATE);
    assert_eq!(framing, Framing::Close);
    assert!(!keep_alive);
    let out = text(&out);
    assert!(out.contains("connection: close\r\n"), "{out}");
    assert!(!out.contains("transfer-encoding"), "{out}");
    let mut parts = head(200, &[("content-length", "0")]);
    let (out, _, keep_alive) = encode(&mut parts, &old, STREAM, true, DATE);
    assert!(keep_alive);
    assert!(text(&out).contains("connection: keep-alive\r\n"));
}

#[test]
fn a_refusal_closes() {
    let out = text(&refusal(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, DATE));
    assert!(out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    assert!(
        out.contains("content-length: 0\r\nconnection: close\r\n"),
        "{out}"
    );
}
