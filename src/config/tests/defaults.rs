//! `toolpulse config --defaults`: every key the parser takes, each with the default the config
//! resolves to.

use std::collections::BTreeSet;

use super::super::defaults::{ARRAY_SECTIONS, Default, defaults_toml, keys};
use super::*;

/// The keys serde accepts in `section`, as its "unknown field" error lists them.
fn accepted(section: &str) -> BTreeSet<String> {
    let text = match section {
        "" => "probe_key = 1\n".to_string(),
        "tools" => "[[tools]]\nmatch = [\"a\"]\nkind = \"mcp\"\nprobe_key = 1\n".into(),
        "mcp.servers" => {
            "[[mcp.servers]]\nname = \"a\"\nupstream = \"http://a\"\nprobe_key = 1\n".into()
        }
        _ => format!("[{section}]\nprobe_key = 1\n"),
    };
    match Config::from_toml_str(&text) {
        Err(ConfigError::UnknownKey { key, known, .. }) if key == "probe_key" => {
            known.into_iter().collect()
        }
        other => panic!("[{section}] did not refuse an unknown key: {other:?}"),
    }
}

#[test]
fn every_key_the_parser_takes_is_listed_and_no_other() {
    let keys = keys();
    let sections: BTreeSet<&str> = keys.iter().map(|k| k.section).collect();
    // The top level's keys are the sections (and `[mcp]`'s `servers`, a key of `[mcp]`).
    let top: BTreeSet<String> = sections
        .iter()
        .map(|s| s.split('.').next().unwrap_or(s).to_string())
        .collect();
    assert_eq!(accepted(""), top);
    for section in sections {
        let mut listed: BTreeSet<String> = keys
            .iter()
            .filter(|k| k.section == section)
            .map(|k| k.name.to_string())
            .collect();
        if section == "mcp" {
            listed.insert("servers".into());
        }
        assert_eq!(accepted(section), listed, "[{section}]");
    }
}

#[test]
fn every_listed_key_has_a_value() {
    for key in keys() {
        let value = match &key.value {
            Default::Value(v) | Default::Unset(v) | Default::Table(v) => v,
        };
        assert!(!value.is_empty(), "{key:?}");
        assert!(!key.about.is_empty(), "{key:?}");
    }
}

#[test]
fn the_printed_defaults_resolve_to_the_built_in_config() {
    let text = defaults_toml();
    let built_in = format!("{:?}", Config::default());
    let printed = Config::from_toml_str(&text).expect("the printed defaults are a valid config");
    assert_eq!(format!("{printed:?}"), built_in);
    // And each value printed is the one the config takes: changing any one changes the config.
    for key in keys() {
        let Default::Value(value) = &key.value else {
            continue;
        };
        let line = format!("\n{} = {value}\n", key.name);
        assert!(text.contains(&line), "{line}");
    }
    assert!(
        ARRAY_SECTIONS
            .iter()
            .all(|s| text.contains(&format!("# [[{s}]]")))
    );
}

#[test]
fn a_wrong_default_is_caught() {
    // The check above fails when a printed value is not the default.
    let text = defaults_toml().replace("interval_ms = 10000", "interval_ms = 9999");
    let printed = Config::from_toml_str(&text).expect("valid");
    assert_ne!(format!("{printed:?}"), format!("{:?}", Config::default()));
}
