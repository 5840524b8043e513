//! The members of a JSON object, visited in order as raw values.
//!
//! serde's derived structs refuse an object that repeats one of their keys, which would make
//! such an event unreadable to toolpulse while every client reads it (JSON.parse, Python's
//! `json`, serde_json's `Value` all keep the last value). Reading members one by one and
//! letting the last assignment win reads what the client reads.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::scan;

/// At most this many members are located by the scan before [`each`] calls back (it calls
/// only once the whole object is known valid); an object with more is read by serde_json.
const MAX_SCANNED: usize = 16;

/// Calls `member(key, value)` for each member of the JSON object `json`, in order, with each
/// value as its raw JSON text; a repeated key is visited again. Fails if `json` is not exactly
/// one JSON object. The scan ([`scan::visit_members`]) locates the members where it decides as
/// serde_json does; serde_json reads the rest (and says why an object is refused).
pub fn each<'a>(
    json: &'a str,
    mut member: impl FnMut(&str, &'a str),
) -> Result<(), serde_json::Error> {
    let mut spans = [const { (0..0, 0..0) }; MAX_SCANNED];
    let mut len = 0;
    let scanned = scan::visit_members(json.as_bytes(), |key, value| {
        if let Some(slot) = spans.get_mut(len) {
            *slot = (key, value);
        }
        len += 1;
    });
    if !scanned || len > MAX_SCANNED {
        return each_by_serde(json, member);
    }
    for (key, value) in spans.into_iter().take(len) {
        member(&json[key], &json[value]);
    }
    Ok(())
}

/// [`each`] by serde_json alone.
fn each_by_serde<'a>(
    json: &'a str,
    mut member: impl FnMut(&str, &'a str),
) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(json);
    de.deserialize_map(Members(&mut |key, value: &'a RawValue| {
        member(key, value.get())
    }))?;
    de.end()
}

/// The member `name` of the JSON object `json` as raw JSON text (its last occurrence, as
/// clients read it), unless it is `null`; `None` too when `json` is not one JSON object.
pub fn get<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let mut last = None;
    let scanned = scan::visit_members(json.as_bytes(), |key, value| {
        if &json[key] == name {
            last = Some(&json[value]);
        }
    });
    if !scanned {
        last = None;
        each_by_serde(json, |key, value| {
            if key == name {
                last = Some(value);
            }
        })
        .ok()?;
    }
    last.filter(|value| *value != "null")
}

/// A JSON string that borrows from the input unless it has escapes.
#[derive(Deserialize)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

/// A string member given as raw JSON text: `Ok(None)` for `null`, an error for anything but a
/// string. One without escapes is borrowed as it lies.
pub fn string(value: &str) -> Result<Option<Cow<'_, str>>, serde_json::Error> {
    if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"'))
        && scan::is_plain(inner.as_bytes())
    {
        return Ok(Some(Cow::Borrowed(inner)));
    }
    let text: Option<Str<'_>> = serde_json::from_str(value)?;
    Ok(text.map(|s| s.0))
}

struct Members<'f, 'a>(&'f mut dyn FnMut(&str, &'a RawValue));

impl<'de: 'a, 'a> Visitor<'de> for Members<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        while let Some(key) = map.next_key::<Str<'de>>()? {
            let value: &'de RawValue = map.next_value()?;
            (self.0)(&key.0, value);
        }
        Ok(())
    }
}

/// What [`each`] visits, as (key, raw value) pairs; `None` when it refuses the text.
#[cfg(test)]
pub(super) fn by_each(json: &str) -> Option<Vec<(String, String)>> {
    let mut seen = Vec::new();
    each(json, |k, v| seen.push((k.to_string(), v.to_string()))).ok()?;
    Some(seen)
}

/// What serde_json alone visits, as [`by_each`] gives it: the oracle of the scan.
#[cfg(test)]
pub(super) fn by_serde(json: &str) -> Option<Vec<(String, String)>> {
    let mut seen = Vec::new();
    each_by_serde(json, |k, v| seen.push((k.to_string(), v.to_string()))).ok()?;
    Some(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(json: &str) -> Result<Vec<(String, String)>, serde_json::Error> {
        let mut seen = Vec::new();
        each(json, |k, v| seen.push((k.to_string(), v.to_string())))?;
        Ok(seen)
    }

    #[test]
    fn visits_members_in_order_repeats_included() {
        let seen = members(r#" {"a":1, "b":{"c":[2]}, "a\u0021":"x", "a":null} "#).expect("ok");
        let keys: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "a!", "a"]);
        assert_eq!(seen[1].1, r#"{"c":[2]}"#);
        assert_eq!(seen[3].1, "null");
    }

    #[test]
    fn refuses_what_is_not_one_object() {
        for json in [
            "[1]",
            "1",
            "",
            "{",
            r#"{"a":1} {}"#,
            r#"{"a" 1}"#,
            r#"{"a":1,}"#,
        ] {
            assert!(members(json).is_err(), "{json}");
        }
    }

    #[test]
    fn strings_borrow_and_null_is_none() {
        assert!(matches!(
            string(r#""plain""#),
            Ok(Some(Cow::Borrowed("plain")))
        ));
        assert_eq!(string(r#""a\nb""#).expect("ok").as_deref(), Some("a\nb"));
        assert_eq!(
            string(r#""\u00e9t\u00e9""#).expect("ok").as_deref(),
            Some("été")
        );
        assert_eq!(string("null").expect("ok"), None);
        assert!(string("1").is_err());
        assert!(string(r#""a"b""#).is_err(), "not one string");
        assert!(string("\"a\tb\"").is_err(), "a raw control character");
    }

    /// The scan's members are serde_json's, and where it declines serde_json reads them.
    #[test]
    fn the_scan_visits_what_serde_json_visits() {
        let many: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
        let many = format!("{{{}}}", many.join(","));
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(70), "]".repeat(70));
        for json in [
            r#"{}"#,
            r#" { "a" : 1 , "b":[true,false,null,{"c":"d"}], "e":-1.5e3 } "#,
            r#"{"type":"x","item":{"id":"fc_1","arguments":"{\"q\":1}"},"type":"y"}"#,
            r#"{"a\u0021":1,"b":2}"#,
            r#"{"é":"ü","s":"\ud83d\ude00"}"#,
            &many,
            &deep,
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":1} x"#,
            "[1]",
            "",
        ] {
            assert_eq!(by_each(json), by_serde(json), "{json}");
        }
        let scans = |json: &str| scan::visit_members(json.as_bytes(), |_, _| {});
        assert!(
            scans(&many),
            "many members are scanned (and then read by serde_json)"
        );
        assert!(!scans(r#"{"a\u0021":1}"#), "an escaped key");
        assert!(!scans(&deep), "too deep");
        assert_eq!(get(&many, "k39"), Some("39"));
        assert_eq!(get(r#"{"a":1,"a":null}"#, "a"), None);
        assert_eq!(get(r#"{"a":null,"a":2}"#, "a"), Some("2"));
        assert_eq!(get(r#"{"a\u0021":1,"a!":2,"a\u0021":3}"#, "a!"), Some("3"));
        assert_eq!(get(r#"{"a":1"#, "a"), None, "not one object");
    }
}
