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

/// Calls `member(key, value)` for each member of the JSON object `json`, in order; a repeated
/// key is visited again. Fails if `json` is not exactly one JSON object.
pub fn each<'a>(
    json: &'a str,
    mut member: impl FnMut(&str, &'a RawValue),
) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(json);
    de.deserialize_map(Members(&mut member))?;
    de.end()
}

/// The member `name` of the JSON object `json` (its last occurrence, as clients read it), unless
/// it is `null`; `None` too when `json` is not one JSON object.
pub fn get<'a>(json: &'a str, name: &str) -> Option<&'a RawValue> {
    let mut found = None;
    each(json, |key, value| {
        if key == name {
            found = (value.get() != "null").then_some(value);
        }
    })
    .ok()?;
    found
}

/// A JSON string that borrows from the input unless it has escapes.
#[derive(Deserialize)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

/// A string member: `Ok(None)` for `null`, an error for anything but a string.
pub fn string(value: &RawValue) -> Result<Option<Cow<'_, str>>, serde_json::Error> {
    let text: Option<Str<'_>> = serde_json::from_str(value.get())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn members(json: &str) -> Result<Vec<(String, String)>, serde_json::Error> {
        let mut seen = Vec::new();
        each(json, |k, v| seen.push((k.to_string(), v.get().to_string())))?;
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
        let plain: &RawValue = serde_json::from_str(r#""plain""#).expect("raw");
        assert!(matches!(string(plain), Ok(Some(Cow::Borrowed("plain")))));
        let escaped: &RawValue = serde_json::from_str(r#""a\nb""#).expect("raw");
        assert_eq!(string(escaped).expect("ok").as_deref(), Some("a\nb"));
        let null: &RawValue = serde_json::from_str("null").expect("raw");
        assert_eq!(string(null).expect("ok"), None);
        let number: &RawValue = serde_json::from_str("1").expect("raw");
        assert!(string(number).is_err());
    }
}
