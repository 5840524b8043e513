//! Differential test: the fields our SSE parser yields equal those of an independent decoder,
//! `sse-stream` (comments aside, which it drops), on every fixture and on generated streams
//! full of edge cases (CR/LF/CRLF, BOMs, colons and spaces, NULs in ids, bad retry values),
//! each fed in random pieces to both.

use crate::common;

use std::convert::Infallible;

use bytes::Bytes;
use common::*;
use futures::StreamExt;
use proptest::prelude::*;
use toolpulse::core::sse::{Item, Parser};

type Fields = (Option<String>, Option<String>, Option<String>, Option<u64>);

fn text(bytes: Option<&[u8]>) -> Option<String> {
    bytes.map(|b| String::from_utf8(b.to_vec()).expect("UTF-8 input"))
}

fn ours(chunks: &[&[u8]]) -> Vec<Fields> {
    let mut parser = Parser::new(usize::MAX);
    let mut items = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        items.extend(std::iter::from_fn(|| parser.next_item()));
    }
    parser.finish();
    items.extend(std::iter::from_fn(|| parser.next_item()));
    items
        .into_iter()
        .filter_map(|item| match item {
            Item::Event(e) => Some((
                text(e.event_type()),
                text(e.data().as_deref()),
                text(e.id()),
                e.retry(),
            )),
            _ => None,
        })
        .filter(|f| *f != (None, None, None, None))
        .collect()
}

fn oracle(chunks: &[&[u8]]) -> Vec<Fields> {
    let stream = futures::stream::iter(
        chunks
            .iter()
            .map(|c| Ok::<_, Infallible>(Bytes::copy_from_slice(c)))
            .collect::<Vec<_>>(),
    );
    let events: Vec<_> =
        futures::executor::block_on(sse_stream::SseByteStream::new(stream).collect());
    events
        .into_iter()
        .map(|e| {
            let e = e.expect("valid UTF-8 input decodes");
            (e.event, e.data, e.id, e.retry)
        })
        .filter(|f| *f != (None, None, None, None))
        .collect()
}

#[test]
fn fixtures_parse_as_the_oracle_parses_them() {
    for name in all_inputs() {
        let input = read(&fixtures_dir().join(&name));
        if std::str::from_utf8(&input).is_err() {
            continue; // the oracle ends its stream on invalid UTF-8; covered below
        }
        let expected = oracle(&[&input]);
        assert!(!expected.is_empty(), "{name}");
        assert_eq!(ours(&[&input]), expected, "{name}");
        let small: Vec<&[u8]> = input.chunks(7).collect();
        assert_eq!(ours(&small), expected, "{name} in 7-byte chunks");
    }
}

#[test]
fn invalid_utf8_is_kept_where_the_oracle_gives_up() {
    let input = b"data: a\n\ndata: \xff\xfe\n\ndata: b\n\n";
    let mut parser = Parser::new(usize::MAX);
    parser.push(input);
    parser.finish();
    let datas: Vec<Vec<u8>> = std::iter::from_fn(|| parser.next_item())
        .filter_map(|i| match i {
            Item::Event(e) => e.data().map(|d| d.into_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(datas, [b"a".to_vec(), b"\xff\xfe".to_vec(), b"b".to_vec()]);
}

/// Pieces that make SSE hard: every field name, line endings of all three kinds, BOMs, colons
/// with and without the optional space, NULs, digits and non-digits for `retry`.
const TOKENS: &[&str] = &[
    "data",
    "event",
    "id",
    "retry",
    "dat",
    ":",
    ": ",
    " ",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "x",
    "é",
    "12",
    "\u{FEFF}",
    "\0",
    "{\"a\":1}",
    "data: v\n",
    "event: e\n",
    "\r\r",
    "ïx",
];

fn stream_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..60).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_streams_parse_as_the_oracle_parses_them(
        input in stream_strategy(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        oracle_cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let bytes = input.as_bytes();
        let points = |cuts: &[prop::sample::Index]| {
            let mut p: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            p.sort_unstable();
            p
        };
        let expected = oracle(&split_at(bytes, &points(&oracle_cuts)));
        prop_assert_eq!(ours(&split_at(bytes, &points(&cuts))), expected, "{:?}", input);
    }
}
