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
