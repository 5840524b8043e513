//! Unit tests of streaming redaction ([`PartialRedactor`] through `Sanitizer::streaming`):
//! split invariance, every value type, escaped keys, invalid JSON that must not leak.

use std::fmt::Write as _;

use proptest::prelude::*;
use serde_json::json;

use super::tests::{arb_json, escape_sensitive_sanitizer, parse, redact_only};
use super::*;

/// Streams `text` cut at the byte offsets `cuts` (sorted char boundaries).
fn stream(sanitizer: &Sanitizer, text: &str, cuts: &[usize]) -> String {
    let mut redactor = sanitizer.streaming();
    let mut out = String::new();
    let mut start = 0;
    for &cut in cuts {
        out.push_str(&redactor.push(&text[start..cut]));
        start = cut;
    }
    out.push_str(&redactor.push(&text[start..]));
    out.push_str(&redactor.finish());
    assert_eq!(redactor.emitted_bytes(), out.len());
    out
}

fn stream_char_by_char(sanitizer: &Sanitizer, text: &str) -> String {
    let cuts: Vec<usize> = text.char_indices().map(|(at, _)| at).skip(1).collect();
    stream(sanitizer, text, &cuts)
}

fn boundaries(text: &str, picks: &[prop::sample::Index]) -> Vec<usize> {
    let mut cuts: Vec<usize> = picks
        .iter()
        .map(|pick| {
            let mut at = pick.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// JSON with every character of every string (keys included) written as `\uXXXX`.
fn escaped_json(value: &Value, out: &mut String) {
    fn string(text: &str, out: &mut String) {
        out.push('"');
        for c in text.chars() {
            for unit in c.encode_utf16(&mut [0; 2]) {
                write!(out, "\\u{unit:04x}").expect("writing to a String");
            }
        }
        out.push('"');
    }
    match value {
        Value::String(text) => string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                escaped_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(key, out);
                out.push(':');
                escaped_json(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Text in which JSON's structural characters and escapes are frequent.
fn arb_garbage() -> impl Strategy<Value = String> {
    let c = prop_oneof![
        3 => prop::sample::select(vec!['{', '}', '[', ']', '"', ':', ',', '\\', ' ', '\n', 'u', '0', 'd', 'e', '8', 'a', 't', 'n', '1', '-', '.', 'é', '😀']),
        1 => any::<char>(),
    ];
    prop::collection::vec(c, 0..40).prop_map(|chars| chars.into_iter().collect())
}

#[test]
fn streaming_emits_non_secret_text_immediately() {
    let s = Sanitizer::default();
    let mut r = s.streaming();
    assert_eq!(r.push(r#"{"que"#), r#"{"que"#);
    assert_eq!(r.push(r#"ry":"hel"#), r#"ry":"hel"#);
    assert_eq!(r.push(r#"lo\"#), r#"lo\"#);
    assert_eq!(r.push(r#"u00e9","api_k"#), r#"u00e9","api_k"#);
    assert_eq!(r.push(r#"ey": "sk-"#), r#"ey": "[REDACTED]""#);
    assert_eq!(r.push(r#"123\"}"#), "");
    assert_eq!(r.push(r#"", "n": 12"#), r#", "n": 12"#);
    assert_eq!(r.push("3}"), "3}");
    assert_eq!(r.finish(), "");
    let total = r#"{"query":"hello\u00e9","api_key": "[REDACTED]", "n": 123}"#;
    assert_eq!(r.emitted_bytes(), total.len());
    assert_eq!(
        parse(total),
        json!({"query": "helloé", "api_key": REDACTED, "n": 123})
    );
}

#[test]
fn streaming_redacts_values_of_every_type() {
    let s = Sanitizer::default();
    let text = r#"{"token": 12.5e3, "secret": true, "password": null,
        "api_key": {"a": "}", "b": ["]", {"c": "\"{"}]}, "cookie": [[1], {"x": [2]}],
        "after": "kept"}"#;
    let out = stream_char_by_char(&s, text);
    assert_eq!(out, stream(&s, text, &[]));
    assert_eq!(
        parse(&out),
        json!({"token": REDACTED, "secret": REDACTED, "password": REDACTED,
               "api_key": REDACTED, "cookie": REDACTED, "after": "kept"})
    );
}

#[test]
fn streaming_decodes_key_escapes_before_matching() {
    let s = escape_sensitive_sanitizer();
    let text = r#"{"api\u005fkey":"a","\ud83d\ude00token":"b","qu\"ery":"c","\u0070ass\/word\n":"d","k\u00e9y":"e","\u0070assword\n":"f","x\ud83d\ude00":"g","line\nbreak":"h","line\\nbreak":"i"}"#;
    let out = stream_char_by_char(&s, text);
    assert_eq!(parse(&out), redact_only(&s, parse(text)));
    assert_eq!(
        parse(&out),
        json!({"api_key": REDACTED, "😀token": REDACTED, "qu\"ery": "c",
               "pass/word\n": "d", "kéy": "e", "password\n": REDACTED,
               "x😀": REDACTED, "line\nbreak": REDACTED, "line\\nbreak": "i"})
    );
}

#[test]
fn streaming_handles_invalid_json_without_leaking() {
    let s = Sanitizer::default();
    for (text, secret) in [
        (r#"{"api_key" "SECRET"}"#, "SECRET"),
        (r#"{"api_key":"a" "SECRET"}"#, "SECRET"),
        (r#"{"api_key"::"SECRET"}"#, "SECRET"),
        (r#"{"api_key":SECRET,"q":1}"#, "SECRET"),
        (r#"{"api_key":12SECRET"x,y"}"#, "SECRET"),
        (r#"{"api_key":{"a":"SECRET"]]]] tail"#, "SECRET"),
        (r#"{"api_key":"\u12SECRET"}"#, "SECRET"),
        ("]]]}}}{\"token\":\"SECRET", "SECRET"),
    ] {
        let out = stream_char_by_char(&s, text);
        assert!(!out.contains(secret), "{text} -> {out}");
        assert_eq!(out, stream(&s, text, &[]));
    }
}

proptest! {
        #[test]
        fn streaming_is_split_invariant_and_equals_redact_only(
            value in arb_json(),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let s = escape_sensitive_sanitizer();
            let mut escaped = String::new();
            escaped_json(&value, &mut escaped);
            let pretty = serde_json::to_string_pretty(&value).expect("serializable");
            for text in [value.to_string(), pretty, escaped] {
                let want = redact_only(&s, parse(&text));
                let whole = stream(&s, &text, &[]);
                prop_assert_eq!(parse(&whole), want);
                prop_assert_eq!(&stream(&s, &text, &boundaries(&text, &picks)), &whole);
                prop_assert_eq!(&stream_char_by_char(&s, &text), &whole);
            }
        }

        #[test]
        fn streaming_never_panics_and_is_split_invariant_on_any_text(
            text in prop_oneof![arb_garbage(), any::<String>()],
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let s = Sanitizer::default();
            let whole = stream(&s, &text, &[]);
            prop_assert_eq!(&stream(&s, &text, &boundaries(&text, &picks)), &whole);
            prop_assert_eq!(&stream_char_by_char(&s, &text), &whole);
            // Whatever it is, `text` survives the whole-payload path without panicking too.
            let _ = s.text(&text);
        }

        #[test]
        fn streaming_never_leaks_a_secret_followed_by_garbage(
            prefix in prop::sample::select(vec![
                r#"{"api_key":"SECRETVALUE""#,
                r#"{"api_key":"SECRETVALUE"#,
                r#"{"api_key":SECRETVALUE"#,
                r#"{"api_key": {"inner": ["SECRETVALUE""#,
                r#"[{"x":1},{"Authorization":"Bearer SECRETVALUE""#,
                r#"{"password" "SECRETVALUE""#,
                r#"{"token":"x\"SECRETVALUE""#,
                r#"{"api\u005fkey":"SECRETVALUE""#,
                r#"{"nested":{"secret":["a",{"b":"SECRETVALUE""#,
            ]),
            garbage in arb_garbage().prop_filter("no S, so no secret of its own", |g| !g.contains('S')),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let s = Sanitizer::default();
            let text = format!("{prefix}{garbage}");
            let out = stream(&s, &text, &boundaries(&text, &picks));
            prop_assert!(!out.contains("SECRETVALUE"), "{} -> {}", text, out);
            prop_assert!(!s.text_as_string(&text).contains("SECRETVALUE"));
        }

}
