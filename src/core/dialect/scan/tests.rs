use super::*;

fn members(json: &str) -> Members {
    match scan(json.as_bytes()) {
        Scan::Object(m) => m,
        other => panic!("{json}: {other:?}"),
    }
}

#[test]
fn finds_the_top_level_members_only() {
    let json = r#" {"response":{"sequence_number":1,"output_index":[2]},"type" : "x",
        "sequence_number": 12 ,"output_index":3, "sequence_number":13} "#;
    let m = members(json);
    let at = |r: Option<Range<usize>>| r.map(|r| &json[r]);
    assert_eq!(at(m.kind), Some("\"x\""));
    assert_eq!(at(m.sequence_number), Some("13"));
    assert_eq!(at(m.output_index), Some("3"));
}

#[test]
fn refuses_what_serde_json_refuses() {
    for json in [
        "",
        "[]",
        "1",
        "{",
        "}",
        r#"{"a"}"#,
        r#"{"a":}"#,
        r#"{"a":1,}"#,
        r#"{"a":1 "b":2}"#,
        r#"{"a":01}"#,
        r#"{"a":-}"#,
        r#"{"a":1.}"#,
        r#"{"a":1e}"#,
        r#"{"a":.5}"#,
        r#"{"a":tru}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":{"b"}}"#,
        r#"{"a":{,}}"#,
        r#"{"a":[}"#,
        r#"{"a":"\x"}"#,
        r#"{"a":"\u12g4"}"#,
        "{\"a\":\"\u{1}\"}",
        r#"{"a":1} x"#,
        r#"{"a":"x}"#,
        r#"{"a":[1]]}"#,
        r#"{"a":{}}}"#,
        r#"{1:2}"#,
    ] {
        assert_eq!(scan(json.as_bytes()), Scan::Invalid, "{json}");
        let object = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(json);
        assert!(object.is_err(), "{json}");
    }
}

#[test]
fn accepts_what_serde_json_accepts() {
    for json in [
        "{}",
        " {\t}\n",
        r#"{"a":[],"b":{},"c":[[{"d":[null,true,false,-0,0.5e+3,1E-2,"\u00e9\n"]}]]}"#,
        r#"{"a":"\ud800 lone surrogates are skipped"}"#,
        r#"{"n":-12.25e10,"s":"é ☃ \"q\" \\ \/"}"#,
    ] {
        assert!(matches!(scan(json.as_bytes()), Scan::Object(_)), "{json}");
    }
}

#[test]
fn finds_special_bytes_in_strings_as_a_byte_loop_does() {
    let slow = |b: &[u8]| b.iter().position(|&x| SPECIAL_IN_STRING[x as usize]);
    let mut text: Vec<u8> = (0..=255u8).cycle().take(600).collect();
    for start in 0..text.len() {
        assert_eq!(
            special_in_string::<false>(&text[start..]),
            slow(&text[start..]),
            "{start}"
        );
    }
    text.retain(|b| !SPECIAL_IN_STRING[*b as usize]);
    for special in [b'"', b'\\', 0, 0x1f] {
        for at in 0..20 {
            let mut t = text[..30].to_vec();
            t[at] = special;
            t[at + 3] = b'"';
            assert_eq!(
                special_in_string::<false>(&t),
                Some(at),
                "{special} at {at}"
            );
        }
    }
    assert_eq!(special_in_string::<false>(&text), None);
    let slow_high = |b: &[u8]| b.iter().position(|&x| SPECIAL_OR_HIGH[x as usize]);
    let all: Vec<u8> = (0..=255u8).rev().cycle().take(600).collect();
    for start in 0..all.len() {
        let rest = &all[start..];
        assert_eq!(special_in_string::<true>(rest), slow_high(rest), "{start}");
    }
}

#[test]
fn checks_utf8_in_strings_as_from_utf8_does() {
    let valid = [
        "é",
        "☃",
        "😀",
        "aé\\n☃\\u00e9😀z",
        "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}",
    ];
    for text in valid {
        let json = format!("{{\"a\":\"{text}\",\"b\":{{\"{text}\":[\"{text}\"]}}}}");
        assert!(matches!(scan(json.as_bytes()), Scan::Object(_)), "{json}");
    }
    let invalid: [&[u8]; 9] = [
        b"\xff",
        b"\x80",
        b"\xc3",
        b"\xc3(",
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xe2\x98",
        b"ok\xe2\x98\\n",
    ];
    for bytes in invalid {
        for json in [
            [&b"{\"a\":\""[..], bytes, b"\"}"].concat(),
            [&b"{\"a\":[\"x\",\""[..], bytes, b"\"]}"].concat(),
            [&b"{\""[..], bytes, b"\":1}"].concat(),
        ] {
            assert_eq!(scan(&json), Scan::Invalid, "{json:?}");
            assert!(std::str::from_utf8(&json).is_err());
        }
    }
    assert_eq!(scan(b"{\"a\":1}\xff"), Scan::Invalid);
    assert_eq!(scan(b"{\"a\":\xc3\xa9}"), Scan::Invalid);
}

#[test]
fn declines_a_type_the_caller_reads_whole() {
    let whole = |kind: &[u8]| kind == b"x";
    assert_eq!(scan_unless(br#"{"type":"x","a":1}"#, whole), Scan::Decline);
    assert_eq!(scan_unless(br#"{"a":1,"type":"x"}"#, whole), Scan::Decline);
    assert_eq!(scan_unless(br#"{"type":"\u0078"}"#, whole), Scan::Decline);
    assert!(matches!(
        scan_unless(br#"{"type":"y","a":{"type":"x"}}"#, whole),
        Scan::Object(_)
    ));
    assert!(matches!(
        scan_unless(br#"{"type":1}"#, whole),
        Scan::Object(_)
    ));
}

#[test]
fn declines_escaped_top_level_keys_and_deep_nesting() {
    assert_eq!(scan(br#"{"sequence\u005fnumber":1}"#), Scan::Decline);
    let deep = format!("{{\"a\":{}1{}}}", "[".repeat(70), "]".repeat(70));
    assert_eq!(scan(deep.as_bytes()), Scan::Decline);
    let fine = format!("{{\"a\":{}1{}}}", "[".repeat(60), "]".repeat(60));
    assert!(matches!(scan(fine.as_bytes()), Scan::Object(_)));
}

/// serde_json's verdict on `json` as one object (its values skipped, as the scan skips them),
/// after the UTF-8 check the caller's serde_json path makes first.
fn serde_json_accepts(json: &[u8]) -> bool {
    use std::collections::BTreeMap;
    std::str::from_utf8(json).is_ok()
        && serde_json::from_slice::<BTreeMap<String, serde::de::IgnoredAny>>(json).is_ok()
}

/// The scan agrees with serde_json on `json` and on every prefix of it (each cut short ends
/// in a different place of the string and word tests), and returns the scan of `json`.
fn judged_as_serde_json_does(json: &[u8]) -> Scan {
    for end in 0..=json.len() {
        let part = &json[..end];
        let verdict = scan(part);
        match verdict {
            Scan::Object(_) => assert!(serde_json_accepts(part), "{part:?}"),
            Scan::Invalid => assert!(!serde_json_accepts(part), "{part:?}"),
            Scan::Decline => {}
        }
    }
    scan(json)
}

/// Strings are skipped eight bytes at a time up to their first byte that is not plain ASCII;
/// the fewer than eight bytes before the end of the data as a shifted last word. Every length,
/// with a special byte at every place, in every role a string has, ended by the data or not.
#[test]
fn strings_of_every_length_with_a_special_byte_anywhere() {
    let specials: [&[u8]; 8] = [
        b"",
        b"\\\"",
        b"\\n",
        b"\\u00e9",
        "é".as_bytes(),
        b"\x01",
        b"\\x",
        b"\xff",
    ];
    for len in 0..20 {
        for special in specials {
            for at in 0..=len {
                if special.is_empty() && at > 0 {
                    break;
                }
                let mut text = vec![b'w'; len];
                text.splice(at..at, special.iter().copied());
                let quoted = [&b"\""[..], &text, b"\""].concat();
                let valid = serde_json_accepts(&[&b"{\"a\":"[..], &quoted, b"}"].concat());
                for (before, after) in [
                    (&b"{\"a\":"[..], &b"}"[..]),
                    (b"{\"a\":", b",\"sequence_number\":7}"),
                    (b"{\"a\":[1,", b"]}"),
                    (b"{\"a\":{", b":2},\"sequence_number\":7}"),
                    (b"{", b":3,\"sequence_number\":7}"),
                    (b"{\"type\":", b"}"),
                    (b"{\"type\":", b",\"sequence_number\":7}"),
                ] {
                    let json = [before, &quoted, after].concat();
                    let verdict = judged_as_serde_json_does(&json);
                    let declined = special.starts_with(b"\\")
                        && (before == b"{" || before.ends_with(b"\"type\":"));
                    match verdict {
                        Scan::Object(m) => {
                            assert!(valid && !declined, "{json:?}");
                            if after.ends_with(b"\"sequence_number\":7}") {
                                assert_eq!(m.sequence_number.map(|r| &json[r]), Some(&b"7"[..]));
                            }
                            if before.ends_with(b"\"type\":") {
                                assert_eq!(m.kind.map(|r| &json[r]), Some(&quoted[..]));
                            }
                        }
                        Scan::Invalid => assert!(!valid, "{json:?}"),
                        Scan::Decline => assert!(valid && declined, "{json:?}"),
                    }
                }
            }
        }
    }
}

/// Plain integers are taken in one step, the rest of the grammar apart: both as serde_json
/// judges them, inside and at the end of a container, and at the end of the data.
#[test]
fn numbers_as_serde_json_reads_them() {
    let numbers = [
        "0",
        "-0",
        "7",
        "10",
        "-12",
        "01",
        "00",
        "-01",
        "-",
        "--1",
        "+1",
        "1.",
        "1.e3",
        ".5",
        "1.5",
        "0.0",
        "-0.25",
        "1e",
        "1e+",
        "1e-",
        "1E5",
        "1e+5",
        "0e0",
        "2.5E-3",
        "1ee2",
        "1.2.3",
        "2-",
        "-a",
        "1a",
        "18446744073709551616",
        "1e400",
    ];
    for number in numbers {
        let valid = serde_json_accepts(format!("{{\"a\":{number}}}").as_bytes());
        for json in [
            format!("{{\"sequence_number\":{number}}}"),
            format!("{{\"sequence_number\":{number},\"a\":1}}"),
            format!("{{\"sequence_number\":{number} }}"),
            format!("{{\"a\":[{number}],\"b\":[{number},{number}],\"sequence_number\":{number}}}"),
            format!("{{\"a\":{{\"b\":{number}}},\"sequence_number\":{number}}}"),
        ] {
            match judged_as_serde_json_does(json.as_bytes()) {
                Scan::Object(m) => {
                    assert!(valid, "{json}");
                    assert_eq!(m.sequence_number.map(|r| &json[r]), Some(number), "{json}");
                }
                Scan::Invalid => assert!(!valid, "{json}"),
                Scan::Decline => panic!("{json}"),
            }
        }
    }
}

/// The compact layout is read by looking at the next byte; whitespace before or after any
/// structural byte takes the loop, and the spans found are the same.
#[test]
fn whitespace_between_any_tokens() {
    let compact = r#"{"type":"response.output_text.delta","sequence_number":57,"item_id":"msg_0","output_index":0,"a":[{"b":[1,"c",true]},{}],"e":{},"sequence_number":58,"delta":"some words "}"#;
    let spans = |json: &str| match scan(json.as_bytes()) {
        Scan::Object(m) => {
            [m.kind, m.sequence_number, m.output_index].map(|span| span.map(|r| json[r].to_owned()))
        }
        other => panic!("{json}: {other:?}"),
    };
    let expected = spans(compact);
    assert_eq!(expected[1].as_deref(), Some("58"));
    let structural = |c: Option<char>| c.is_some_and(|c| "{}[]:,".contains(c));
    let mut in_string = false;
    for (at, c) in compact.char_indices() {
        let before = compact[..at].chars().next_back();
        if !in_string && (structural(Some(c)) || structural(before)) {
            for space in [" ", "\n", "\t", "\r", " \r\n\t "] {
                let json = format!("{}{space}{}", &compact[..at], &compact[at..]);
                assert!(serde_json_accepts(json.as_bytes()), "{json}");
                assert_eq!(spans(&json), expected, "{json}");
            }
        }
        if c == '"' {
            in_string = !in_string;
        }
    }
    for space in [" ", "\u{a0}", "\u{b}", "\u{c}"] {
        let json = format!("{compact}{space}");
        assert_eq!(
            matches!(scan(json.as_bytes()), Scan::Object(_)),
            serde_json_accepts(json.as_bytes()),
            "{json:?}"
        );
    }
}
