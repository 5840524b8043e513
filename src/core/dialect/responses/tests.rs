//! Unit tests of reading Responses events: what may go unread, numbers and their spans, call
//! items, outputs, native items, and the scanner checked against serde_json.

use super::*;

#[test]
fn only_an_event_whose_line_and_data_agree_on_a_quiet_type_may_go_unread() {
    let skips = |line: &[u8], data: &[u8]| may_skip(line, data).is_some();
    let delta = b"response.output_text.delta";
    let data = br#"{"type":"response.output_text.delta","delta":"say \"type\""}"#;
    assert!(skips(delta, data));
    assert!(skips(delta, br#"{"type": "response.output_text.delta"}"#));
    // The line lies, or the data names its type elsewhere, or twice.
    assert!(!skips(b"response.output_text.deltx", data));
    assert!(!skips(
        delta,
        br#"{"delta":"","type":"response.output_text.delta"}"#
    ));
    let twice = br#"{"type":"response.output_text.delta","type":"response.output_item.added"}"#;
    assert!(!skips(delta, twice));
    // Types that can signal are always read.
    let added = b"response.output_item.added";
    assert!(!skips(added, br#"{"type":"response.output_item.added"}"#));
    assert!(!skips(
        b"response.completed",
        br#"{"type":"response.completed"}"#
    ));
}

#[test]
fn a_skipped_event_is_numbered_where_its_data_has_a_sequence_number_anywhere() {
    let numbered = |line: &[u8], data: &[u8]| may_skip(line, data).map(|s| s.numbered);
    let delta = b"response.output_text.delta";
    let cases: [(&[u8], bool); 6] = [
        (
            br#"{"type":"response.output_text.delta","sequence_number":1}"#,
            true,
        ),
        (
            br#"{"type":"response.output_text.delta","delta":"","sequence_number":1}"#,
            true,
        ),
        // Found, not read: as a string or nested, it counts all the same; with its quotes
        // escaped, or as part of a longer key, it does not.
        (
            br#"{"type":"response.output_text.delta","delta":"sequence_number"}"#,
            true,
        ),
        (
            br#"{"type":"response.output_text.delta","x":{"sequence_number":1}}"#,
            true,
        ),
        (
            br#"{"type":"response.output_text.delta","delta":"\"sequence_number\" q"}"#,
            false,
        ),
        (
            br#"{"type":"response.output_text.delta","sequence_numbers":1}"#,
            false,
        ),
    ];
    for (data, want) in cases {
        let memmem = memchr::memmem::find(data, b"\"sequence_number\"").is_some();
        assert_eq!(memmem, want, "{}", String::from_utf8_lossy(data));
        assert_eq!(
            numbered(delta, data),
            Some(want),
            "{}",
            String::from_utf8_lossy(data)
        );
    }
    // A type spelled as the key.
    let line = b"sequence_number";
    assert_eq!(numbered(line, br#"{"type":"sequence_number"}"#), Some(true));
}

#[test]
fn leading_type_is_a_plain_string_that_opens_the_object() {
    assert_eq!(leading_type(br#"{"type":"a.b","x":1}"#), Some(&b"a.b"[..]));
    assert_eq!(leading_type(br#"{"type": "a.b"}"#), Some(&b"a.b"[..]));
    assert_eq!(leading_type(br#"{"type":"a\u002eb"}"#), None);
    assert_eq!(leading_type(br#"{ "type":"a"}"#), None);
    assert_eq!(leading_type(br#"{"x":1,"type":"a"}"#), None);
    assert_eq!(leading_type(br#"{"type":1}"#), None);
    assert_eq!(leading_type(br#"{"type":"unterminated"#), None);
}

mod scan_agrees_with_serde_json {
    use super::*;
    use proptest::prelude::*;

    /// The scan reads an event as serde_json does: its numbers alone, and every member.
    fn agree(data: &[u8]) {
        assert_eq!(
            read(data),
            read_full(data),
            "{}",
            String::from_utf8_lossy(data)
        );
        if let Ok(text) = std::str::from_utf8(data) {
            use crate::core::dialect::members::{by_each, by_serde};
            assert_eq!(by_each(text), by_serde(text), "{text}");
        }
    }

    #[test]
    fn on_every_fixture_event() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut dirs = vec![root];
        let mut events = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("fixtures").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "sse") {
                    continue;
                }
                let mut parser = crate::core::sse::Parser::new(usize::MAX);
                parser.push(&std::fs::read(&path).expect("fixture"));
                parser.finish();
                while let Some(item) = parser.next_item() {
                    if let crate::core::sse::Item::Event(event) = item
                        && let Some(data) = event.data()
                    {
                        agree(&data);
                        events += 1;
                    }
                }
            }
        }
        assert!(events > 1000, "{events} events");
    }

    /// Pieces of JSON, valid and not, that the scanner must judge as serde_json does.
    const TOKENS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        " ",
        "\n",
        "\"type\"",
        "\"sequence_number\"",
        "\"output_index\"",
        "\"item\"",
        "\"item_id\"",
        "\"content_index\"",
        "\"delta\"",
        "\"deltas\"",
        "\"logprobs\"",
        "\"obfuscation\"",
        "\"response.output_text.delta\"",
        "\"response.output_text.deltas\"",
        "\"response.completed\"",
        "\"response.output_item.added\"",
        "0",
        "12",
        "-3",
        "1.5",
        "2e3",
        "01",
        "1.",
        "null",
        "true",
        "fals",
        "\"a\\\"b\"",
        "\"\\u00e9\"",
        "\"\\ud800\"",
        "\"\\x\"",
        "\"\u{1}\"",
        "\"é☃\"",
        "\"type\\u0020\"",
        "\"",
        "\\",
        "18446744073709551616",
    ];

    fn value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[ -~é\\u{1}-\\u{1f}\"\\\\]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                proptest::collection::btree_map("[a-z_]{0,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn on_token_soup(tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..40)) {
            agree(tokens.concat().as_bytes());
        }

        #[test]
        fn on_events_with_any_values(
            members in proptest::collection::vec(
                (prop_oneof![
                    Just("type"), Just("sequence_number"), Just("output_index"),
                    Just("delta"), Just("item"), Just("item_id"), Just("content_index"),
                    Just("logprobs"), Just("obfuscation"), Just("deltas"), Just("delta\\u0073")
                ], value()),
                0..6,
            ),
            kind in proptest::sample::select(&[
                "response.output_text.delta", "response.completed", "response.output_item.done",
                "x", "response.output_text.deltas", "response.output_text.delta\\u0020",
            ][..]),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut text = format!("{{\"type\":\"{kind}\"");
            for (key, value) in &members {
                text += &format!(",\"{key}\":{value}");
            }
            text += "}";
            agree(text.as_bytes());
            // And cut short anywhere.
            let at = cut.index(text.len() + 1);
            if text.is_char_boundary(at) {
                agree(&text.as_bytes()[..at]);
            }
        }
    }
}

proptest::proptest! {
    /// A plain number's value, as the standard library parses its digits (`None` past
    /// `u64::MAX`).
    #[test]
    fn plain_numbers_read_as_parse_reads_them(digits in "[0-9]{0,22}") {
        proptest::prop_assert_eq!(plain_u64(&digits), digits.parse::<u64>().ok());
    }
}

#[test]
fn plain_numbers_at_the_edges_of_u64() {
    for (digits, want) in [
        ("9999999999999999999", Some(9_999_999_999_999_999_999)),
        ("18446744073709551615", Some(u64::MAX)),
        ("18446744073709551616", None),
        ("99999999999999999999", None),
        ("1a", None),
        ("", None),
    ] {
        assert_eq!(plain_u64(digits), want, "{digits}");
    }
}

#[test]
fn sequence_number_value_and_span() {
    let data = br#"{"type":"x","response":{"sequence_number":99},"sequence_number":12}"#;
    let r = read(data).expect("readable");
    let seq = r.sequence_number.expect("numbered");
    assert_eq!(seq.value, 12);
    assert_eq!(&data[seq.span], b"12");
    assert_eq!(r.signal, None);
}

#[test]
fn odd_sequence_numbers_are_not_renumbered() {
    for data in [
        &br#"{"sequence_number":-1}"#[..],
        br#"{"sequence_number":1.0}"#,
        br#"{"sequence_number":"1"}"#,
        br#"{"sequence_number":1e2}"#,
        br#"{"sequence_number":null}"#,
    ] {
        assert_eq!(read(data).map(|r| r.sequence_number), Ok(None), "{data:?}");
    }
}

#[test]
fn function_call_items() {
    let added = br#"{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"item_7","type":"function_call","status":"in_progress","name":"web_search","call_id":"call_7","arguments":""}}"#;
    let Some(Signal::CallAdded(call)) = read(added).expect("ok").signal else {
        panic!("expected CallAdded")
    };
    assert_eq!(call.call_id, "call_7");
    assert_eq!(call.item_id.as_deref(), Some("item_7"));
    assert_eq!(call.output_index, Some(1));
    assert_eq!(call.name, "web_search");
    let done = br#"{"type":"response.output_item.done","item":{"type":"function_call","call_id":"c","name":"n"}}"#;
    assert!(matches!(
        read(done).expect("ok").signal,
        Some(Signal::CallDone(_))
    ));
}

#[test]
fn outputs_string_parts_status_and_error() {
    let s = br#"{"type":"response.output_item.added","item":{"type":"function_call_output","call_id":"c","status":"completed","output":"search failed: x"}}"#;
    let Some(Signal::Output { call_id, facts }) = read(s).expect("ok").signal else {
        panic!("expected Output")
    };
    assert_eq!(call_id, "c");
    assert_eq!(facts.status.as_deref(), Some("completed"));
    assert_eq!(facts.texts, vec!["search failed: x"]);
    let parts = br#"{"type":"response.output_item.added","item":{"type":"function_call_output","call_id":"c","error":{"m":1},"output":[{"type":"input_text","text":"a"},{"type":"input_image"}]}}"#;
    let Some(Signal::Output { facts, .. }) = read(parts).expect("ok").signal else {
        panic!("expected Output")
    };
    assert_eq!(facts.error.as_deref(), Some(r#"{"m":1}"#));
    assert_eq!(facts.texts, vec!["a"]);
    let null_error = br#"{"type":"response.output_item.added","item":{"type":"function_call_output","call_id":"c","error":null}}"#;
    let Some(Signal::Output { facts, .. }) = read(null_error).expect("ok").signal else {
        panic!("expected Output")
    };
    assert_eq!(facts.error, None);
}

#[test]
fn a_repeated_key_keeps_its_last_value_as_clients_read_it() {
    let data =
        br#"{"type":"a","sequence_number":1,"type":"response.completed","sequence_number":7}"#;
    let r = read(data).expect("readable");
    assert_eq!(r.signal, Some(Signal::Terminal));
    let seq = r.sequence_number.expect("numbered");
    assert_eq!((seq.value, &data[seq.span]), (7, &b"7"[..]));
    let data = br#"{"type":"response.completed","type":null}"#;
    assert_eq!(read(data).expect("readable").signal, None);
    let item = br#"{"type":"response.output_item.done","item":{"type":"function_call","call_id":"a","name":"x","call_id":"b"}}"#;
    let Some(Signal::CallDone(call)) = read(item).expect("readable").signal else {
        panic!("expected CallDone")
    };
    assert_eq!(call.call_id, "b");
}

#[test]
fn native_items_terminal_done_and_garbage() {
    let native =
        br#"{"type":"response.output_item.added","item":{"type":"mcp_call","id":"m","name":"x"}}"#;
    let Some(Signal::Native(item)) = read(native).expect("ok").signal else {
        panic!("a native item")
    };
    assert_eq!(
        (&*item.item_id, item.kind, item.done),
        ("m", Kind::Mcp, false)
    );
    assert_eq!(item.name.as_deref(), Some("x"));
    let done = br#"{"type":"response.output_item.done","item":{"type":"mcp_call","id":"m","status":"completed","output":"42","error":null}}"#;
    let Some(Signal::Native(item)) = read(done).expect("ok").signal else {
        panic!("a native item")
    };
    assert!(item.done);
    assert_eq!(item.facts.texts, ["42"]);
    assert_eq!(item.facts.error, None);
    let no_id = br#"{"type":"response.output_item.added","item":{"type":"web_search_call"}}"#;
    assert_eq!(read(no_id).expect("ok").signal, None);
    let nested_error = br#"{"type":"error","error":{"type":"server_error","message":"x"}}"#;
    assert_eq!(
        read(nested_error).expect("ok").signal,
        Some(Signal::Terminal)
    );
    assert_eq!(read(b"[DONE]"), Ok(Reading::default()));
    for bad in [&b"not json"[..], b"[1]", b"\xff"] {
        assert_eq!(read(bad), Err(Unreadable), "{bad:?}");
    }
    // Readable (so renumbered), but meaning nothing for tool calls.
    for odd in [
        &br#"{"type":5,"sequence_number":3}"#[..],
        br#"{"type":"response.output_item.done","sequence_number":3,"item":{"type":"function_call","call_id":"c","name":1}}"#,
        br#"{"type":"response.output_item.done","sequence_number":3,"item":{"typ":"function_call","call_id":"c"}}"#,
        br#"{"type":"response.output_item.done","sequence_number":3,"item":[]}"#,
    ] {
        let reading = read(odd).expect("readable");
        assert_eq!(reading.signal, None, "{odd:?}");
        assert_eq!(reading.sequence_number.map(|s| s.value), Some(3));
    }
    assert!(may_signal(b"response.output_item.done"));
    assert!(!may_signal(b"response.output_text.delta"));
}

#[test]
fn always_read_is_may_signal_or_lists_output() {
    let named = [TEXT_DELTA, CREATED, ITEM_ADDED, ITEM_DONE, ARGUMENTS_DELTA]
        .into_iter()
        .chain(TERMINAL_TYPES.iter().copied())
        .chain(LISTS_OUTPUT.iter().copied());
    for kind in named {
        let kind = kind.as_bytes();
        // The type, and every other type of its length or one byte off (a prefix, one more byte).
        let mut near = vec![
            kind.to_vec(),
            kind[..kind.len() - 1].to_vec(),
            kind.to_vec(),
        ];
        near[2].push(b'x');
        for i in 0..kind.len() {
            let mut other = kind.to_vec();
            other[i] ^= 1;
            near.push(other);
        }
        for k in near {
            let want = may_signal(&k) || lists_output(&k);
            assert_eq!(always_read(&k), want, "{}", String::from_utf8_lossy(&k));
        }
    }
    assert!(!always_read(b""));
}

#[test]
fn the_usual_type_is_compared_where_it_lies() {
    let delta = TEXT_DELTA.as_bytes();
    let datas: [&[u8]; 7] = [
        br#"{"type":"response.output_text.delta","x":1}"#,
        br#"{"type": "response.output_text.delta"}"#,
        br#"{"type":"response.output_text.deltas"}"#,
        br#"{"type":"response.output_text.delt"}"#,
        br#"{"type":"response.output_text.delta"#,
        br#"{"type":"response.output_text.delta\""}"#,
        br#"{ "type":"response.output_text.delta"}"#,
    ];
    for data in datas {
        // As the general check: the leading type, up to its closing quote, is the line's.
        let general = leading_type_end(data).and_then(|(k, end)| (k == delta).then_some(end));
        assert_eq!(leading_type_end_if(data, delta), general, "{data:?}");
    }
    assert_eq!(leading_type_end_if(datas[0], delta), Some(36));
}
