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

#[test]
fn an_mcp_listener_beyond_loopback_needs_a_token() {
    let dir = std::env::temp_dir().join(format!("toolpulse-cli-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("mcp.toml");
    let config = "[mcp]\nlisten = \"0.0.0.0:0\"\n\n[[mcp.servers]]\nname = \"github\"\nupstream = \"http://127.0.0.1:1/mcp\"\n";
    std::fs::write(&path, config).expect("write config");
    let path = path.to_str().expect("utf-8 path");
    let run = |args: &[&str], token: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolpulse"));
        command
            .args(args)
            .env_remove("TOOLPULSE_CONFIG")
            .env_remove("TOOLPULSE_PROGRESS_TOKEN");
        if let Some(token) = token {
            command.env("TOOLPULSE_PROGRESS_TOKEN", token);
        }
        command.output().expect("run toolpulse")
    };
    for args in [
        &["check", path][..],
        &["--config", path, "--upstream", "http://127.0.0.1:1"],
    ] {
        let out = run(args, None);
        assert!(!out.status.success(), "{args:?} must refuse");
        let e = stderr(&out);
        assert!(
            e.contains("line 2: mcp.listen") && e.contains("[progress] token"),
            "{e}"
        );
    }
    let out = run(&["check", path], Some("a-token-of-16-chars"));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("mcp: listen 0.0.0.0:0"), "{text}");
    assert!(text.contains("/github -> http://127.0.0.1:1/mcp"), "{text}");
    assert!(text.contains("progress: bearer token required"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
