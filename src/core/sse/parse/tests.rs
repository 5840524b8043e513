//! Unit tests of the SSE parser: fields and raw bytes, line endings, chunk boundaries, limits,
//! zero-copy slices; and of writing an event again with other data.

use super::*;

fn items(input: &[u8], max: usize) -> Vec<Item> {
    let mut p = Parser::new(max);
    p.push(input);
    p.finish();
    std::iter::from_fn(|| p.next_item()).collect()
}

fn events(input: &[u8]) -> Vec<Event> {
    items(input, 1 << 20)
        .into_iter()
        .filter_map(|i| match i {
            Item::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn bytes_of(items: &[Item]) -> Vec<u8> {
    let mut out = Vec::new();
    for item in items {
        match item {
            Item::Event(e) => out.extend_from_slice(e.raw()),
            Item::Oversize(b) | Item::Incomplete(b) => out.extend_from_slice(b),
        }
    }
    out
}

#[test]
fn fields_and_raw_bytes() {
    let input = b"event: a\ndata: {\"x\":1}\nid: 7\nretry: 30\n\n: ping\n\n";
    let evs = events(input);
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].event_type(), Some(&b"a"[..]));
    assert_eq!(evs[0].data().as_deref(), Some(&b"{\"x\":1}"[..]));
    assert_eq!(evs[0].id(), Some(&b"7"[..]));
    assert_eq!(evs[0].retry(), Some(30));
    assert_eq!(&evs[0].raw()[..], &input[..40]);
    assert!(evs[1].has_comment());
    assert_eq!(evs[1].data(), None);
}

#[test]
fn line_endings_lf_cr_crlf_mixed() {
    for input in [
        &b"data: a\r\ndata: b\r\n\r\n"[..],
        b"data: a\rdata: b\r\r",
        b"data: a\ndata: b\r\n\n",
    ] {
        let evs = events(input);
        assert_eq!(evs.len(), 1, "{input:?}");
        assert_eq!(evs[0].data().as_deref(), Some(&b"a\nb"[..]));
        assert_eq!(&evs[0].raw()[..], input);
    }
}

#[test]
fn cr_at_chunk_end_is_held_until_next_byte() {
    let mut p = Parser::new(1024);
    p.push(b"data: a\n\r");
    assert_eq!(p.next_item(), None, "the CR may start a CRLF");
    p.push(b"\ndata: b\n\n");
    let Some(Item::Event(e)) = p.next_item() else {
        panic!("expected an event")
    };
    assert_eq!(&e.raw()[..], b"data: a\n\r\n");
}

#[test]
fn colon_space_and_fieldless_lines() {
    let evs = events(b"data:a\ndata:  b\ndata\nevent\n\n");
    assert_eq!(evs[0].data().as_deref(), Some(&b"a\n b\n"[..]));
    assert_eq!(evs[0].event_type(), Some(&b""[..]));
}

#[test]
fn bom_only_at_stream_start() {
    let evs = events(b"\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\n");
    assert_eq!(evs[0].data().as_deref(), Some(&b"x"[..]));
    assert_eq!(evs[1].data(), None, "a later BOM is part of a field name");
}

#[test]
fn id_with_nul_ignored_and_bad_retry_ignored() {
    let evs = events(b"id: 1\nid: a\0b\nretry: 1x\ndata: d\n\n");
    assert_eq!(evs[0].id(), Some(&b"1"[..]));
    assert_eq!(evs[0].retry(), None);
}

#[test]
fn invalid_utf8_is_kept_as_bytes() {
    let evs = events(b"data: \xff\xfe\n\n");
    assert_eq!(evs[0].data().as_deref(), Some(&b"\xff\xfe"[..]));
}

#[test]
fn incomplete_tail_at_eof() {
    let it = items(b"data: a\n\ndata: b", 1024);
    assert!(matches!(&it[1], Item::Incomplete(b) if &b[..] == b"data: b"));
}

#[test]
fn oversize_event_streams_raw_and_parsing_resumes() {
    let big = format!("data: {}\n\n", "x".repeat(100));
    let input = format!("data: a\n\n{big}data: b\n\n");
    for chunk in [1, 7, 64, input.len()] {
        let mut p = Parser::new(50);
        let mut out = Vec::new();
        for c in input.as_bytes().chunks(chunk) {
            p.push(c);
            out.extend(std::iter::from_fn(|| p.next_item()));
            assert!(p.buffered_bytes() <= 50 + chunk, "memory stays bounded");
        }
        p.finish();
        out.extend(std::iter::from_fn(|| p.next_item()));
        assert_eq!(bytes_of(&out), input.as_bytes());
        let datas: Vec<_> = out
            .iter()
            .filter_map(|i| match i {
                Item::Event(e) => e.data().map(|d| d.into_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(datas, vec![b"a".to_vec(), b"b".to_vec()], "chunk {chunk}");
    }
}

#[test]
fn never_ending_line_is_bounded() {
    let mut p = Parser::new(1000);
    let mut out = 0;
    for _ in 0..1000 {
        p.push(&[b'x'; 100]);
        while let Some(Item::Oversize(b)) = p.next_item() {
            out += b.len();
        }
        assert!(p.buffered_bytes() <= 1100);
    }
    assert_eq!(out + p.buffered_bytes(), 100_000);
}

#[test]
fn events_whole_in_a_pushed_chunk_are_slices_of_it() {
    let input = b"data: a\n\nevent: x\ndata: b\r\n\r\n: c\n\ndata: d";
    for cut in 0..input.len() {
        let (first, second) = (Bytes::copy_from_slice(&input[..cut]), &input[cut..]);
        let mut p = Parser::new(1024);
        let mut items = Vec::new();
        for chunk in [first.clone(), Bytes::copy_from_slice(second)] {
            let range = chunk.as_ptr_range();
            p.push_bytes(chunk.clone());
            while let Some(item) = p.next_item() {
                if let Item::Event(e) = &item {
                    let raw = e.raw().as_ptr_range();
                    let inside = range.start <= raw.start && raw.end <= range.end;
                    let whole = inside || raw.start == raw.end;
                    // An event that began in the first chunk is held; the others are not.
                    let began_here =
                        std::ptr::eq(chunk.as_ptr(), first.as_ptr()) || !items.is_empty() && inside;
                    assert!(whole || !began_here || cut == 0, "cut {cut}: copied");
                }
                items.push(item);
            }
        }
        p.finish();
        items.extend(std::iter::from_fn(|| p.next_item()));
        assert_eq!(bytes_of(&items), input, "cut {cut}");
        let mut whole = Parser::new(1024);
        whole.push(input);
        whole.finish();
        let expected: Vec<Item> = std::iter::from_fn(|| whole.next_item()).collect();
        assert_eq!(items, expected, "cut {cut}: the same items");
    }
}

#[test]
fn the_bytes_that_may_end_a_held_event() {
    assert_eq!(bytes_to_end_an_event(Some(b'a'), b"bc\n\nrest"), 4);
    assert_eq!(bytes_to_end_an_event(Some(b'\n'), b"\nrest"), 1);
    assert_eq!(bytes_to_end_an_event(Some(b'\n'), b"\r\nrest"), 2);
    assert_eq!(bytes_to_end_an_event(Some(b'\r'), b"\n\r"), 1);
    assert_eq!(bytes_to_end_an_event(None, b"no end"), 6);
}

fn events_of(bytes: &[u8]) -> Vec<Item> {
    let mut parser = Parser::new(1 << 20);
    parser.push(bytes);
    std::iter::from_fn(|| parser.next_item()).collect()
}

#[test]
fn an_event_is_written_again_with_other_data() {
    let raw = b"event: x\r\ndata: {\"a\":\r\n: note\r\ndata: 1}\r\nid: 7\r\n\r\n";
    let items = events_of(raw);
    let [Item::Event(event)] = &items[..] else {
        panic!("{items:?}")
    };
    assert_eq!(event.data().as_deref(), Some(&b"{\"a\":\n1}"[..]));
    let mut out = BytesMut::new();
    event.write_with_data(b"{\"a\":\n2}", &mut out);
    assert_eq!(
        &out[..],
        b"event: x\r\ndata: {\"a\":\ndata: 2}\n: note\r\nid: 7\r\n\r\n"
    );
    let again = events_of(&out);
    let [Item::Event(again)] = &again[..] else {
        panic!("{again:?}")
    };
    assert_eq!(again.data().as_deref(), Some(&b"{\"a\":\n2}"[..]));
    assert_eq!(again.id(), Some(&b"7"[..]));
}

#[test]
fn raw_offset_of_data_maps_multiline() {
    let e = &events(b"data: ab\ndata: cd\n\n")[0];
    assert_eq!(e.raw_offset_of_data(0), Some(6));
    assert_eq!(e.raw_offset_of_data(2), None, "the joining newline");
    assert_eq!(e.raw_offset_of_data(3), Some(15));
    assert_eq!(e.raw_offset_of_data(5), None);
}

mod split {
    use proptest::prelude::*;

    use super::*;

    /// Pieces of event streams, the usual shape and every oddity the fast path leaves to the
    /// general one (CR and CRLF, comments, other fields, tabs, a BOM, a second `data` line).
    const TOKENS: &[&[u8]] = &[
        b"event: response.output_text.delta\n",
        b"data: {\"type\":\"a\",\"delta\":\"words\"}\n",
        b"data:x\n",
        b"event:\n",
        b"\n",
        b"\n",
        b"\r",
        b"\r\n",
        b": ping\n",
        b"id: 7\n",
        b"retry: 30\n",
        b"data\n",
        b"\t",
        b"\0",
        b"\xEF\xBB\xBF",
        b"x",
    ];

    /// The items of `input` pushed as `Bytes` in pieces cut at `cuts`, then finished.
    fn items_split(input: &[u8], cuts: &[usize], max: usize) -> Vec<Item> {
        let mut parser = Parser::new(max);
        let mut out = Vec::new();
        let mut from = 0;
        for &cut in cuts.iter().chain([&input.len()]) {
            let cut = cut.clamp(from, input.len());
            parser.push_bytes(Bytes::copy_from_slice(&input[from..cut]));
            out.extend(std::iter::from_fn(|| parser.next_item()));
            from = cut;
        }
        parser.finish();
        out.extend(std::iter::from_fn(|| parser.next_item()));
        out
    }

    /// `items` with each run of oversize pieces as one piece: an oversize event is handed out as
    /// its bytes are scanned, so where it is cut depends on how the input was split.
    fn joined(items: Vec<Item>) -> Vec<Item> {
        let mut out: Vec<Item> = Vec::new();
        for item in items {
            match (out.last_mut(), item) {
                (Some(Item::Oversize(run)), Item::Oversize(piece)) => {
                    *run = [&run[..], &piece[..]].concat().into();
                }
                (_, item) => out.push(item),
            }
        }
        out
    }

    /// The items of `input` from the general path alone (no fast path), in one piece.
    fn items_general(input: &[u8], max: usize) -> Vec<Item> {
        let mut parser = Parser::new(max);
        parser.push(input);
        parser.finish();
        std::iter::from_fn(|| parser.general_item()).collect()
    }

    proptest! {
        /// However the stream is cut (after each token: whole events in most pieces, the fast
        /// path's case; anywhere; a byte at a time), the same items come out as from the general
        /// path alone.
        #[test]
        fn the_same_items_however_the_input_is_split(
            tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..30),
            mut cuts in proptest::collection::vec(0usize..400, 0..8),
            max in prop_oneof![Just(1usize << 20), 8usize..80],
        ) {
            let input = tokens.concat();
            cuts.sort_unstable();
            let general = items_general(&input, max);
            prop_assert_eq!(bytes_of(&general), &input[..]);
            let general = joined(general);
            let ends: Vec<usize> = tokens
                .iter()
                .scan(0, |end, t| {
                    *end += t.len();
                    Some(*end)
                })
                .collect();
            let bytewise: Vec<usize> = (0..input.len()).collect();
            for cuts in [&[][..], &cuts, &ends, &bytewise] {
                let items = joined(items_split(&input, cuts, max));
                prop_assert_eq!(&items, &general, "cuts {:?}", cuts);
            }
        }
    }
}
