//! The client's side: response heads read (framing, lengths, keep-alive, refusals) and request
//! heads written.

use http::header::{CONTENT_LENGTH, HeaderValue};
use http::{Method, Request, StatusCode, Version};

use super::*;
use crate::http1::head::{MAX_CONTENT_LENGTH, MAX_HEAD_BYTES, MAX_HEADERS};

fn final_head(raw: &str, method: &Method) -> (Head, usize) {
    match parse(raw.as_bytes(), method) {
        Ok(Parsed::Final { head, len }) => (head, len),
        other => panic!("{raw:?}: {other:?}"),
    }
}

fn get(raw: &str) -> Head {
    final_head(raw, &Method::GET).0
}

fn refused(raw: &str) -> HeadError {
    match parse(raw.as_bytes(), &Method::GET) {
        Err(e) => e,
        other => panic!("{raw:?} was not refused: {other:?}"),
    }
}

#[test]
fn a_length_head_and_where_the_body_starts() {
    let raw = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello";
    let (head, len) = final_head(raw, &Method::GET);
    assert_eq!(&raw[len..], "hello");
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.version, Version::HTTP_11);
    assert_eq!(head.framing, Framing::Length(5));
    assert!(head.keep_alive);
    let values: Vec<_> = head.headers.get_all("x-a").iter().collect();
    assert_eq!(values, ["1", "2"]);
}

#[test]
fn partial_until_the_blank_line() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    for end in 0..raw.len() {
        assert!(
            matches!(parse(&raw[..end], &Method::GET), Ok(Parsed::Partial)),
            "{end}"
        );
    }
    assert!(matches!(
        parse(raw, &Method::GET),
        Ok(Parsed::Final { len: 38, .. })
    ));
}

#[test]
fn both_content_length_and_transfer_encoding_are_refused() {
    let raw = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(refused(raw), HeadError::LengthAndTransferEncoding);
}

#[test]
fn equal_content_lengths_are_one_length() {
    let raw = "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 7, 7\r\n\r\n";
    let head = get(raw);
    assert_eq!(head.framing, Framing::Length(7));
    let lengths: Vec<_> = head.headers.get_all(CONTENT_LENGTH).iter().collect();
    assert_eq!(lengths, ["7"], "one field, one value");
    let head = final_head(
        "HTTP/1.1 200 OK\r\nContent-Length: 07\r\n\r\n",
        &Method::HEAD,
    )
    .0;
    assert_eq!(head.headers[CONTENT_LENGTH], "7");
}

#[test]
fn differing_or_invalid_content_lengths_are_refused() {
    for value in [
        "7\r\nContent-Length: 8",
        "7, 8",
        "+7",
        "-7",
        "1 2",
        "0x7",
        "7,",
        "",
        "18446744073709551616",
        "18446744073709551614",
    ] {
        let raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n");
        assert_eq!(refused(&raw), HeadError::InvalidContentLength, "{value:?}");
    }
    let raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {MAX_CONTENT_LENGTH}\r\n\r\n");
    assert_eq!(get(&raw).framing, Framing::Length(MAX_CONTENT_LENGTH));
}

#[test]
fn chunked_only_as_the_final_coding() {
    let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n";
    assert_eq!(get(chunked).framing, Framing::Chunked);
    let last_field =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(get(last_field).framing, Framing::Chunked);
    let not_final = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n";
    let head = get(not_final);
    assert_eq!(head.framing, Framing::Close);
    assert!(!head.keep_alive);
}

#[test]
fn no_length_reads_to_the_close() {
    let head = get("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(head.framing, Framing::Close);
    assert!(!head.keep_alive);
}

#[test]
fn transfer_encoding_on_http_1_0_is_refused() {
    let raw = "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(refused(raw), HeadError::TransferEncodingOnHttp10);
}

#[test]
fn obs_fold_is_refused() {
    let raw = "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n";
    assert!(matches!(refused(raw), HeadError::Malformed(_)));
}

#[test]
fn bad_status_lines_and_fields_are_refused() {
    for raw in [
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX A: 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A : 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: \x01\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: \x7f\r\n\r\n",
    ] {
        assert!(matches!(refused(raw), HeadError::Malformed(_)), "{raw:?}");
    }
    assert_eq!(
        refused("HTTP/1.1 099 Low\r\n\r\n"),
        HeadError::InvalidStatus(99)
    );
}

#[test]
fn an_oversized_head_is_refused() {
    let mut raw = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
    raw.resize(MAX_HEAD_BYTES - 1, b'a');
    assert!(matches!(parse(&raw, &Method::GET), Ok(Parsed::Partial)));
    raw.push(b'a');
    assert_eq!(
        parse(&raw, &Method::GET).expect_err("refused"),
        HeadError::TooLarge
    );
    // Complete, but past the limit: refused however much was read.
    raw.extend_from_slice(b"\r\n\r\n");
    assert_eq!(
        parse(&raw, &Method::GET).expect_err("refused"),
        HeadError::TooLarge
    );
    // Right at the limit, accepted.
    raw.truncate(MAX_HEAD_BYTES - 4);
    raw.extend_from_slice(b"\r\n\r\n");
    assert!(
        matches!(parse(&raw, &Method::GET), Ok(Parsed::Final { len, .. }) if len == MAX_HEAD_BYTES)
    );
}

#[test]
fn too_many_headers_are_refused() {
    let fields = |n: usize| -> String {
        let lines: String = (0..n).map(|i| format!("X-{i}: {i}\r\n")).collect();
        format!("HTTP/1.1 200 OK\r\n{lines}\r\n")
    };
    assert_eq!(get(&fields(MAX_HEADERS)).headers.len(), MAX_HEADERS);
    assert_eq!(refused(&fields(MAX_HEADERS + 1)), HeadError::TooManyHeaders);
}

#[test]
fn interim_responses_are_skipped_then_the_final_one_parsed() {
    let raw = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let mut rest = raw.as_bytes();
    let mut skipped = 0;
    let (head, len) = loop {
        match parse(rest, &Method::GET).expect("a valid head") {
            Parsed::Informational { len } => {
                skipped += 1;
                rest = &rest[len..];
            }
            Parsed::Final { head, len } => break (head, len),
            Parsed::Partial => panic!("partial"),
        }
    };
    assert_eq!(skipped, 2);
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(&rest[len..], b"ok");
}

#[test]
fn switching_protocols_is_refused() {
    let raw = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
    assert_eq!(refused(raw), HeadError::SwitchingProtocols);
}

#[test]
fn head_204_and_304_have_no_body_whatever_the_fields_say() {
    let with_length = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    assert_eq!(
        final_head(with_length, &Method::HEAD).0.framing,
        Framing::Nothing
    );
    for status in ["204 No Content", "304 Not Modified"] {
        for fields in ["Content-Length: 10", "Transfer-Encoding: chunked", "X: y"] {
            let raw = format!("HTTP/1.1 {status}\r\n{fields}\r\n\r\nbody");
            assert_eq!(get(&raw).framing, Framing::Nothing, "{raw:?}");
        }
    }
}

#[test]
fn keep_alive_by_version_and_connection() {
    let cases = [
        ("HTTP/1.1", "", true),
        ("HTTP/1.1", "Connection: close\r\n", false),
        ("HTTP/1.1", "Connection: keep-alive, Close\r\n", false),
        ("HTTP/1.0", "", false),
        ("HTTP/1.0", "Connection: Keep-Alive\r\n", true),
        (
            "HTTP/1.0",
            "Connection: keep-alive\r\nConnection: close\r\n",
            false,
        ),
        (
            "HTTP/1.0",
            "Connection: close\r\nConnection: keep-alive\r\n",
            false,
        ),
    ];
    for (version, fields, expected) in cases {
        let raw = format!("{version} 200 OK\r\n{fields}Content-Length: 0\r\n\r\n");
        assert_eq!(get(&raw).keep_alive, expected, "{raw:?}");
    }
}

#[test]
fn the_request_head_is_one_buffer_in_origin_form() {
    let (mut head, ()) = Request::post("http://gw:8080/v1/responses?x=1")
        .header("host", "gw:8080")
        .header("content-type", "application/json")
        .body(())
        .expect("request")
        .into_parts();
    head.headers.append("x-a", HeaderValue::from_static("1"));
    head.headers.append("x-a", HeaderValue::from_static("2"));
    let out = encode(&head);
    assert_eq!(
        &out[..],
        b"POST /v1/responses?x=1 HTTP/1.1\r\nhost: gw:8080\r\ncontent-type: application/json\r\nx-a: 1\r\nx-a: 2\r\n\r\n"
    );
    assert!(out.capacity() >= out.len());
}
