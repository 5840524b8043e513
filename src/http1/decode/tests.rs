//! The body decoder: each framing's data and end, the limits, the refusals, and the same
//! outcome however the bytes are split.

use super::*;

/// Feeds `pieces` one after another as a connection would (appending each to the bytes not
/// yet consumed, decoding until the decoder wants more), then reports end of file unless
/// the body ended first. Returns the data and the outcome.
fn run(framing: Framing, pieces: &[&[u8]]) -> (Vec<u8>, Result<(), DecodeError>) {
    let mut decoder = Decoder::new(framing);
    let mut pending = Vec::new();
    let mut data = Vec::new();
    for piece in pieces {
        pending.extend_from_slice(piece);
        while !decoder.is_done() {
            let step = match decoder.decode(&pending) {
                Ok(step) => step,
                Err(e) => return (data, Err(e)),
            };
            assert!(step.consumed <= pending.len());
            if let Some(range) = step.data {
                assert!(!range.is_empty() && range.end <= step.consumed);
                data.extend_from_slice(&pending[range]);
            }
            pending.drain(..step.consumed);
            if step.consumed == 0 {
                assert!(pending.is_empty(), "no progress on {pending:?}");
                break;
            }
        }
        if decoder.is_done() {
            return (data, Ok(()));
        }
    }
    let end = decoder.eof();
    (data, end)
}

fn whole(framing: Framing, body: &[u8]) -> (Vec<u8>, Result<(), DecodeError>) {
    run(framing, &[body])
}

fn chunked(body: &[u8]) -> (Vec<u8>, Result<(), DecodeError>) {
    whole(Framing::Chunked, body)
}

#[test]
fn length_takes_its_bytes_and_leaves_the_rest() {
    let mut decoder = Decoder::new(Framing::Length(5));
    let step = decoder.decode(b"hel").expect("data");
    assert_eq!(
        step,
        Step {
            consumed: 3,
            data: Some(0..3)
        }
    );
    assert!(!decoder.is_done());
    let step = decoder.decode(b"loHTTP/1.1").expect("data");
    assert_eq!(
        step,
        Step {
            consumed: 2,
            data: Some(0..2)
        }
    );
    assert!(decoder.is_done());
    assert_eq!(decoder.eof(), Ok(()));
}

#[test]
fn length_zero_and_nothing_are_done_at_once() {
    for framing in [Framing::Length(0), Framing::Nothing] {
        let mut decoder = Decoder::new(framing);
        assert!(decoder.is_done());
        assert_eq!(
            decoder.decode(b"x"),
            Ok(Step {
                consumed: 0,
                data: None
            })
        );
    }
}

#[test]
fn eof_framing_is_all_data_until_the_close() {
    let mut decoder = Decoder::new(Framing::Close);
    assert_eq!(
        decoder.decode(b"abc"),
        Ok(Step {
            consumed: 3,
            data: Some(0..3)
        })
    );
    assert_eq!(
        decoder.decode(b""),
        Ok(Step {
            consumed: 0,
            data: None
        })
    );
    assert!(!decoder.is_done());
    assert_eq!(decoder.eof(), Ok(()));
    assert!(decoder.is_done());
}

#[test]
fn chunked_data_with_extensions_and_trailers_dropped() {
    let body =
        b"5;name=value;x\r\nhello\r\n6 \t;e\r\n world\r\n0\r\nExpires: never\r\nX-T:\r\n\r\n";
    assert_eq!(chunked(body), (b"hello world".to_vec(), Ok(())));
}

#[test]
fn chunked_stops_at_its_end() {
    let mut decoder = Decoder::new(Framing::Chunked);
    let step = decoder.decode(b"0\r\n\r\nHTTP/1.1").expect("framing");
    assert_eq!(
        step,
        Step {
            consumed: 5,
            data: None
        }
    );
    assert!(decoder.is_done());
}

#[test]
fn chunk_size_overflow_is_refused() {
    assert_eq!(
        chunked(b"10000000000000000\r\n").1,
        Err(DecodeError::ChunkSizeOverflow)
    );
    assert_eq!(
        chunked(b"fffffffffffffffff\r\n").1,
        Err(DecodeError::ChunkSizeOverflow)
    );
    // 2^64 - 1 is a size (the body is then cut short), and leading zeros do not overflow.
    assert_eq!(
        chunked(b"FFFFFFFFFFFFFFFF\r\nab").1,
        Err(DecodeError::BodyCut)
    );
    assert_eq!(
        chunked(b"00000000000000000001\r\na\r\n0\r\n\r\n"),
        (b"a".to_vec(), Ok(()))
    );
}

#[test]
fn junk_chunk_sizes_are_refused() {
    for body in [
        &b"0x5\r\n"[..],
        b"g\r\n",
        b"\r\n",
        b" 5\r\n",
        b"5 5\r\n",
        b"-5\r\n",
        b"5\n",
        b"5\rx",
        b"5;a\nhello\r\n",
    ] {
        assert_eq!(
            chunked(body).1,
            Err(DecodeError::InvalidChunkSize),
            "{body:?}"
        );
    }
}

#[test]
fn chunk_data_must_end_with_crlf() {
    for body in [&b"1\r\nab\r\n"[..], b"1\r\na\n0\r\n\r\n", b"1\r\na\rx"] {
        assert_eq!(
            chunked(body).1,
            Err(DecodeError::MissingCrlfAfterData),
            "{body:?}"
        );
    }
}

#[test]
fn extensions_over_the_limit_are_refused() {
    let ext = |n: usize| format!("1;{}\r\na\r\n", "e".repeat(n));
    let just_under = format!("{}0\r\n\r\n", ext(MAX_CHUNK_EXTENSIONS - 1));
    assert_eq!(chunked(just_under.as_bytes()), (b"a".to_vec(), Ok(())));
    let over = format!("{}0\r\n\r\n", ext(MAX_CHUNK_EXTENSIONS));
    assert_eq!(
        chunked(over.as_bytes()).1,
        Err(DecodeError::ExtensionsTooLong)
    );
    // The limit is per body, not per chunk.
    let half = MAX_CHUNK_EXTENSIONS / 2;
    let spread = format!("{}{}0\r\n\r\n", ext(half), ext(half));
    assert_eq!(
        chunked(spread.as_bytes()).1,
        Err(DecodeError::ExtensionsTooLong)
    );
}

#[test]
fn trailers_over_the_limits_are_refused() {
    let with_trailers = |fields: &str| format!("1\r\na\r\n0\r\n{fields}\r\n");
    // The section's bytes, final CRLF included, must stay under the limit.
    let fits = format!("X: {}\r\n", "v".repeat(MAX_TRAILER_BYTES - 8));
    assert_eq!(
        chunked(with_trailers(&fits).as_bytes()),
        (b"a".to_vec(), Ok(()))
    );
    let over = format!("X: {}\r\n", "v".repeat(MAX_TRAILER_BYTES - 7));
    assert_eq!(
        chunked(with_trailers(&over).as_bytes()).1,
        Err(DecodeError::TrailersTooLong)
    );
    let many = |n: usize| (0..n).map(|i| format!("T{i}: v\r\n")).collect::<String>();
    assert_eq!(
        chunked(with_trailers(&many(MAX_TRAILERS)).as_bytes()).1,
        Ok(())
    );
    assert_eq!(
        chunked(with_trailers(&many(MAX_TRAILERS + 1)).as_bytes()).1,
        Err(DecodeError::TooManyTrailers)
    );
}

#[test]
fn invalid_trailers_are_refused() {
    for fields in [
        "X Y: 1\r\n",
        ": 1\r\n",
        " X: 1\r\n",
        "X\r\n",
        "X: \x01\r\n",
        "X: 1\rY",
    ] {
        let body = format!("0\r\n{fields}\r\n");
        assert_eq!(
            chunked(body.as_bytes()).1,
            Err(DecodeError::InvalidTrailer),
            "{fields:?}"
        );
    }
    assert_eq!(chunked(b"0\r\n\rx").1, Err(DecodeError::InvalidTrailer));
    for fields in ["X: 1\n", "\n", "X\n"] {
        let body = format!("0\r\n{fields}\r\n");
        assert_eq!(
            chunked(body.as_bytes()).1,
            Err(DecodeError::TrailerBareLf),
            "{fields:?}"
        );
    }
}

#[test]
fn a_cut_body_is_refused() {
    assert_eq!(
        whole(Framing::Length(5), b"abc"),
        (b"abc".to_vec(), Err(DecodeError::BodyCut))
    );
    for body in [
        &b""[..],
        b"5",
        b"5\r\nab",
        b"5\r\nhello\r",
        b"0\r\n",
        b"0\r\nX: 1\r\n",
    ] {
        assert_eq!(chunked(body).1, Err(DecodeError::BodyCut), "{body:?}");
    }
}

#[test]
fn an_error_is_final() {
    let mut decoder = Decoder::new(Framing::Chunked);
    assert_eq!(
        decoder.decode(b"5\r\nhel"),
        Ok(Step {
            consumed: 6,
            data: Some(3..6)
        })
    );
    assert_eq!(
        decoder.decode(b"lo\n"),
        Ok(Step {
            consumed: 2,
            data: Some(0..2)
        })
    );
    assert_eq!(
        decoder.decode(b"\n"),
        Err(DecodeError::MissingCrlfAfterData)
    );
    assert_eq!(
        decoder.decode(b"\r\n0\r\n\r\n"),
        Err(DecodeError::MissingCrlfAfterData)
    );
    assert_eq!(decoder.eof(), Err(DecodeError::MissingCrlfAfterData));
    assert!(!decoder.is_done());
}

/// Every body gives the same data and outcome cut in two at every position, and byte by
/// byte, as whole.
#[test]
fn any_split_gives_the_same_data_and_outcome() {
    let long_ext = format!(
        "3;{}\r\nabc\r\n0\r\n\r\n",
        "x".repeat(MAX_CHUNK_EXTENSIONS - 1)
    );
    let cases: Vec<(Framing, &[u8])> = vec![
        (
            Framing::Chunked,
            b"5;a=b\r\nhello\r\n1 ;c=\"d\"\r\n \r\n10\r\n0123456789abcdef\r\n0;last\r\nX-T: 1\r\nY:\t2 \r\n\r\nnext",
        ),
        (Framing::Chunked, b"3\r\nabc\r\n0\r\nX: 1\n\r\n"),
        // Plain size lines (taken whole when they lie in one read), one of 17 digits (not).
        (
            Framing::Chunked,
            b"2\r\nab\r\n00000000000000001\r\nc\r\nA\r\n0123456789\r\n000\r\n\r\n",
        ),
        (Framing::Chunked, b"FFFFFFFFFFFFFFFF\r\nab"),
        (Framing::Chunked, b"2\r\nab\r\n3\r"),
        (Framing::Chunked, b"4\r\nabc"),
        (Framing::Chunked, long_ext.as_bytes()),
        (Framing::Length(11), b"hello world and more"),
        (Framing::Length(30), b"hello world"),
        (Framing::Close, b"all of it\r\n0\r\n\r\n"),
    ];
    for (framing, body) in cases {
        let expected = whole(framing, body);
        for at in 0..=body.len() {
            let (a, b) = body.split_at(at);
            assert_eq!(run(framing, &[a, b]), expected, "{framing:?} split at {at}");
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(run(framing, &bytes), expected, "{framing:?} byte by byte");
    }
}
