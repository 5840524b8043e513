//! The `toolpulse` binary as a user runs it: `rewrite` and `check`, good input and bad.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::*;

fn toolpulse(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(args)
        .env_remove("TOOLPULSE_CONFIG")
        .output()
        .expect("run toolpulse")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn rewrite_a_file_with_the_defaults() {
    let input = fixtures_dir().join("web_search.sse");
    let out = toolpulse(&["rewrite", input.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = read(&fixtures_dir().join("web_search.out.sse"));
    assert_eq!(out.stdout, expected);
}

#[test]
fn rewrite_stdin_with_a_config_from_the_environment() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(["rewrite", "-"])
        .env("TOOLPULSE_CONFIG", fixtures_dir().join("mcp_success.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let input = read(&fixtures_dir().join("mcp_success.sse"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&input)
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    assert_eq!(
        out.stdout,
        read(&fixtures_dir().join("mcp_success.out.sse"))
    );
}

#[test]
fn check_prints_the_resolved_rules() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/toolpulse.toml");
    let out = toolpulse(&["check", config]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1. github_*, jira_* -> mcp (config)"),
        "{text}"
    );
    assert!(
        text.contains("anything else -> function (fallback)"),
        "{text}"
    );
    let antwort = concat!(env!("CARGO_MANIFEST_DIR"), "/config/antwort.toml");
    assert!(toolpulse(&["check", antwort]).status.success());
}

#[test]
fn bad_config_and_bad_input_fail_with_a_message() {
    let dir = std::env::temp_dir().join(format!("toolpulse-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[tools]]\nmatch = [\"a[\"]\nkind = \"mcp\"\n").expect("write");
    for args in [
        vec!["check", bad.to_str().expect("path")],
        vec!["rewrite", "--config", bad.to_str().expect("path"), "-"],
    ] {
        let out = toolpulse(&args);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains("line 2: tools[0].match[0]"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = toolpulse(&["rewrite", "/no/such/file.sse"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot read /no/such/file.sse"),
        "{}",
        stderr(&out)
    );
    let out = toolpulse(&["check", "/no/such/config.toml"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot read config"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Each TOML error toolpulse can meet, with the key the message must name and its line.
const BAD_CONFIGS: [(&str, &str, &str, &str); 5] = [
    (
        "a wrong type",
        "[heartbeat]\ninterval_ms = \"10s\"\n",
        "interval_ms",
        "line 2",
    ),
    (
        "an unknown key",
        "[heartbeat]\nintervl_ms = 10\n",
        "intervl_ms",
        "line 2",
    ),
    (
        "an unknown section",
        "[heartbeat]\ninterval_ms = 10\n[nosuch]\nx = 1\n",
        "nosuch",
        "line 3",
    ),
    (
        "a string where a list belongs",
        "[sanitize]\nredact_keys = \"x\"\n",
        "redact_keys",
        "line 2",
    ),
    (
        "a syntax error",
        "[heartbeat\ninterval_ms = 10\n",
        "[heartbeat",
        "line 1",
    ),
];

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolpulse-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn toml_errors_are_printed_once() {
    let dir = temp_dir("toml");
    for (what, text, key, line) in BAD_CONFIGS {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text).expect("write");
        let out = toolpulse(&["check", path.to_str().expect("path")]);
        assert!(!out.status.success(), "{what}");
        let err = stderr(&out);
        // toml's report starts with this; printed twice, it came back after ": ".
        assert_eq!(err.matches("TOML parse error").count(), 1, "{what}: {err}");
        assert_eq!(err.matches("invalid config").count(), 1, "{what}: {err}");
        assert!(err.contains(key) && err.contains(line), "{what}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
