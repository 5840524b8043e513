//! Unit tests of whole-payload sanitizing; the generators and helpers here are shared with
//! the streaming tests.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::core::sanitize::secret::DEFAULT_REDACT_PATTERNS;

pub(super) fn sanitizer(max_string_bytes: usize, max_payload_bytes: usize) -> Sanitizer {
    let patterns: Vec<String> = DEFAULT_REDACT_PATTERNS
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    Sanitizer::new(&patterns, max_string_bytes, max_payload_bytes).expect("valid defaults")
}

/// The defaults plus patterns that only match when a key's escapes (`\n`, surrogate pairs)
/// are decoded right.
pub(super) fn escape_sensitive_sanitizer() -> Sanitizer {
    let patterns: Vec<String> = DEFAULT_REDACT_PATTERNS
        .iter()
        .copied()
        .chain(["*😀", "line\nbreak"])
        .map(str::to_owned)
        .collect();
    Sanitizer::new(&patterns, 1000, 10_000).expect("valid patterns")
}

pub(super) fn redact_only(sanitizer: &Sanitizer, mut value: Value) -> Value {
    sanitizer.scrub(&mut value, false);
    value
}

pub(super) fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("test text is JSON")
}

/// Every value under a secret key, at any depth, is exactly [`REDACTED`].
fn assert_no_secret(sanitizer: &Sanitizer, value: &Value) {
    match value {
        Value::Array(items) => items.iter().for_each(|i| assert_no_secret(sanitizer, i)),
        Value::Object(map) => {
            for (key, item) in map {
                if sanitizer.is_secret(key) {
                    assert_eq!(item, REDACTED, "under {key:?}");
                } else {
                    assert_no_secret(sanitizer, item);
                }
            }
        }
        _ => {}
    }
}

fn all_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|i| all_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| all_strings(i, out)),
        _ => {}
    }
}

pub(super) fn arb_key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "api_key",
        "Authorization",
        "token",
        "password",
        "query",
        "nested",
        "X-Api-Key",
        "accessToken",
        "cookie",
        "set-cookie",
        "name",
        "k\"ey",
        "pass\\word",
        "clé 😀",
        "clé",
        "line\nbreak",
        "",
    ])
    .prop_map(str::to_owned)
}

pub(super) fn arb_string() -> impl Strategy<Value = String> {
    let c = prop_oneof![
        4 => prop::char::range('a', 'z'),
        1 => prop::sample::select(vec!['"', '\\', '/', 'é', '😀', '\n', '\u{1}', '\u{2028}', '{', '}', '[', ']', ':', ',', ' ']),
        1 => any::<char>(),
    ];
    prop::collection::vec(c, 0..12).prop_map(|chars| chars.into_iter().collect())
}

pub(super) fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

#[test]
fn matching_is_case_insensitive_and_exact_glob() {
    let s = Sanitizer::default();
    for key in [
        "api_key",
        "X-Api-Key",
        "accessToken",
        "Authorization",
        "AUTHORIZATION",
        "Cookie",
        "client_secret",
        "db/Password",
        "line\npassword",
    ] {
        assert!(s.is_secret(key), "{key}");
    }
    for key in ["query", "set-cookie", "authorization_url", "name", ""] {
        assert!(!s.is_secret(key), "{key}");
    }
}

#[test]
fn bad_pattern_error_names_its_index() {
    let patterns = vec!["ok".to_owned(), "*fine*".to_owned(), "bad[".to_owned()];
    let (index, _) = Sanitizer::new(&patterns, 10, 100).expect_err("unclosed class");
    assert_eq!(index, 2);
}

#[test]
fn marker_bytes_is_the_marker_alone() {
    assert_eq!(MARKER_BYTES, json_len(&json!({ "truncated": true })));
}

#[test]
fn redacts_nested_in_arrays_of_objects() {
    let input = json!({
        "calls": [
            {"name": "a", "api_key": "k1"},
            {"nested": {"Authorization": "Bearer x", "keep": [{"password": "p"}]}},
            "plain"
        ],
        "query": "q"
    });
    let want = json!({
        "calls": [
            {"name": "a", "api_key": REDACTED},
            {"nested": {"Authorization": REDACTED, "keep": [{"password": REDACTED}]}},
            "plain"
        ],
        "query": "q"
    });
    assert_eq!(Sanitizer::default().value(input), want);
}

#[test]
fn secret_value_of_any_type_is_replaced_whole() {
    let input = json!({
        "token": {"a": 1, "b": ["x"]},
        "password": [1, 2, {"c": null}],
        "secret_n": 42,
        "cookie": null,
        "x": {"private_key": true}
    });
    let want = json!({
        "token": REDACTED, "password": REDACTED, "secret_n": REDACTED, "cookie": REDACTED,
        "x": {"private_key": REDACTED}
    });
    assert_eq!(Sanitizer::default().value(input), want);
}

#[test]
fn cuts_strings_on_a_char_boundary() {
    let cases = [
        (5, "ééé", "éé…"),  // 6 bytes; 5 falls inside the third 'é'
        (5, "😀😀", "😀…"), // 8 bytes; 5 falls inside the second emoji
        (3, "😀", "…"),     // nothing whole fits
        (0, "a", "…"),
        (4, "abcd", "abcd"), // exactly at the limit: untouched
        (7, "ab\"\\cdefg", "ab\"\\cde…"),
    ];
    for (max, input, want) in cases {
        let s = sanitizer(max, 1 << 20);
        assert_eq!(s.value(json!([input])), json!([want]), "{max} {input}");
    }
}

#[test]
fn caps_a_megabyte_result_keeping_its_small_fields() {
    let lines: Vec<String> = (0..60_000).map(|i| format!("line {i:08}")).collect();
    let input = json!({
        "exit_code": 0,
        "lines": lines,
        "status": "ok",
        "stdout": "x".repeat(1 << 20),
    });
    assert!(json_len(&input) > 1 << 20);
    let out = Sanitizer::default().value(input);
    assert!(
        json_len(&out) <= DEFAULT_MAX_PAYLOAD_BYTES,
        "{}",
        json_len(&out)
    );
    assert_eq!(out["truncated"], true);
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["status"], "ok");
    assert!(out.get("lines").is_none());
    let stdout = out["stdout"].as_str().expect("kept, cut");
    assert_eq!(stdout, format!("{}…", "x".repeat(DEFAULT_MAX_STRING_BYTES)));
}

#[test]
fn cap_skips_an_entry_that_overflows_but_keeps_later_ones_that_fit() {
    let s = sanitizer(1000, 100);
    // `,"a":"x…60"` is 67 bytes: 18 + 67 = 85 fits; "b" would overflow; `,"c":1` (6) fits.
    let input = json!({"a": "x".repeat(60), "b": "y".repeat(60), "c": 1, "truncated": false});
    let out = s.value(input);
    assert_eq!(out, json!({"a": "x".repeat(60), "c": 1, "truncated": true}));
    assert_eq!(json_len(&out), 91);
}

#[test]
fn caps_a_non_object_into_a_preview() {
    let input = Value::from((0..100_000).collect::<Vec<u32>>());
    let out = Sanitizer::default().value(input);
    assert_eq!(out["truncated"], true);
    let preview = out["preview"].as_str().expect("preview");
    assert!(preview.starts_with("[0,1,2,3,"));
    assert!(preview.ends_with('…'));
    assert_eq!(preview.len(), DEFAULT_MAX_STRING_BYTES + '…'.len_utf8());
    assert_eq!(out.as_object().map(Map::len), Some(2));
}

#[test]
fn text_parses_json_and_sanitizes_it() {
    let s = Sanitizer::default();
    assert_eq!(
        s.text(r#"{"api_key": "sk-1", "n": [1, 2]}"#),
        json!({"api_key": REDACTED, "n": [1, 2]})
    );
    assert_eq!(s.text("42"), json!(42));
    assert_eq!(s.text(r#""quoted""#), json!("quoted"));
}

#[test]
fn non_json_text_becomes_a_cut_string() {
    let s = sanitizer(10, 1000);
    assert_eq!(s.text("hello"), json!("hello"));
    assert_eq!(s.text("hello world, long"), json!("hello worl…"));
    assert_eq!(s.text(""), json!(""));
    assert_eq!(s.text("said \"hi"), json!("said \"hi"));
}

#[test]
fn malformed_json_text_is_still_redacted() {
    let s = Sanitizer::default();
    for text in [
        r#"{"api_key": "sk-SECRET", "query": "#,
        r#"{"query": "x", "token": {"a": "sk-SECRET"#,
        r#"Error: bad args {"password": sk-SECRET}"#,
    ] {
        let out = s.text_as_string(text);
        assert!(!out.contains("sk-SECRET"), "{out}");
        assert!(out.contains(REDACTED), "{out}");
        let Value::String(out) = s.text(text) else {
            panic!("non-JSON text stays a string");
        };
        assert!(!out.contains("sk-SECRET"), "{out}");
    }
}

#[test]
fn text_as_string_round_trips() {
    let s = sanitizer(16, 1000);
    // Compact JSON with short strings comes back byte for byte (key order is kept).
    for text in [
        r#"{"a":1,"b":[true,null,"x"],"c":{"d":"é😀"}}"#,
        "[]",
        "3.5",
        r#""s""#,
    ] {
        assert_eq!(s.text_as_string(text), text);
    }
    // Other JSON comes back compact and sanitized.
    assert_eq!(
        s.text_as_string("{ \"token\" : 1 ,\n \"q\" : \"0123456789abcdefXYZ\" }"),
        r#"{"token":"[REDACTED]","q":"0123456789abcdef…"}"#
    );
    // Non-JSON stays itself, cut.
    assert_eq!(s.text_as_string("plain text"), "plain text");
    assert_eq!(s.text_as_string("0123456789abcdefXYZ"), "0123456789abcdef…");
    // The output of a JSON text parses to `text`'s value.
    let text = r#"{"password":"p","z":"é"}"#;
    assert_eq!(parse(&s.text_as_string(text)), s.text(text));
}

proptest! {
        #[test]
        fn value_output_respects_the_limits(
            value in arb_json(),
            max_string in 0usize..24,
            max_payload in 0usize..400,
        ) {
            let s = sanitizer(max_string, max_payload);
            let out = s.value(value);
            assert_no_secret(&s, &out);
            let len = json_len(&out);
            let is_preview = out.get(PREVIEW_KEY).is_some() && out.as_object().map(Map::len) == Some(2);
            if len > max_payload {
                prop_assert_eq!(&out[TRUNCATED_KEY], &Value::Bool(true));
                prop_assert!(is_preview || len <= max_payload.max(MARKER_BYTES), "{len}");
            }
            let mut strings = Vec::new();
            all_strings(&out, &mut strings);
            for text in strings {
                prop_assert!(text == REDACTED || text.len() <= max_string + '…'.len_utf8());
            }
        }
}
