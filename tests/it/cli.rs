//! The `toolpulse` binary as a user runs it: `rewrite`, `check` and `demo`, good input and bad,
//! and a reader that goes away.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::*;

fn toolpulse(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(args)
        .env_remove("TOOLPULSE_CONFIG")
        .env("TOOLPULSE_HOSTED_KEY", FIXTURES_KEY)
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
        .env("TOOLPULSE_HOSTED_KEY", FIXTURES_KEY)
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
        // toml's report starts with this; printed twice, it came back after ": ". An unknown
        // key or section is said as such, not as a parse error.
        let unknown = what.starts_with("an unknown");
        let reports = usize::from(!unknown);
        assert_eq!(
            err.matches("TOML parse error").count(),
            reports,
            "{what}: {err}"
        );
        assert_eq!(
            err.contains(what.trim_start_matches("an ")),
            unknown,
            "{what}: {err}"
        );
        assert_eq!(err.matches("invalid config").count(), 1, "{what}: {err}");
        assert!(err.contains(key) && err.contains(line), "{what}: {err}");
        let file = format!("{}: invalid config", path.display());
        assert!(err.contains(&file), "names the file: {what}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Whether the child ended as a CLI should when its reader has gone: status 0 (or killed by
/// SIGPIPE, the other usual way), and not a word on stderr about it.
fn assert_ended_quietly(what: &str, out: &Output) {
    use std::os::unix::process::ExitStatusExt;
    const SIGPIPE: i32 = 13;
    let err = stderr(out);
    assert!(
        out.status.success() || out.status.signal() == Some(SIGPIPE),
        "{what}: {:?}: {err}",
        out.status
    );
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{what}: {err}"
    );
}

/// Runs toolpulse with its stdout's reader closed before it can write: the input it needs
/// first comes on stdin, and is written only once the reader is gone.
fn with_closed_stdout(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(args)
        .env_remove("TOOLPULSE_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    // The child may end (at its first write) before it has read everything: a short write here
    // is expected.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child.wait_with_output().expect("wait")
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let config = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/toolpulse.toml"));
    // Larger than a pipe's buffer, so even a reader closed late would be noticed.
    let stream = read(&fixtures_dir().join("recordings/openai/openai-mcp-tool.1.sse"));
    for _ in 0..5 {
        let out = with_closed_stdout(&["check", "/dev/stdin"], &config);
        assert_ended_quietly("check", &out);
        let out = with_closed_stdout(&["rewrite", "-"], &stream);
        assert_ended_quietly("rewrite", &out);
    }
    // The demo reads nothing, but prints over seconds: its reader is gone long before the end.
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .arg("demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    assert_ended_quietly("demo", &child.wait_with_output().expect("wait"));
}

#[test]
fn check_lists_the_tools_of_an_upstream_sample_that_have_no_rule() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/toolpulse.toml");
    let sample = fixtures_dir().join("function_untouched.sse");
    let sample = sample.to_str().expect("utf-8 path");
    let out = toolpulse(&["check", config, "--upstream-sample", sample]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("these tools ran as generic functions") && text.contains("\n  get_weather\n"),
        "{text}"
    );
    assert!(
        text.contains("[[tools]]\nmatch = [\"get_weather\"]\nkind = \"mcp\"\n"),
        "{text}"
    );
    // With a rule for it, nothing to list.
    let config = fixtures_dir().join("recorded_mcp.toml");
    let out = toolpulse(&[
        "check",
        config.to_str().expect("path"),
        "--upstream-sample",
        sample,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no tool ran without a [[tools]] rule"),
        "{text}"
    );
}

#[test]
fn the_readme_quickstart_says_how_to_get_the_binary_and_what_the_first_build_costs() {
    let readme = String::from_utf8(read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"),
    ))
    .expect("utf-8");
    let start = readme
        .find("\n## Quickstart\n")
        .expect("a Quickstart section");
    let rest = &readme[start + 1..];
    let quickstart = &rest[..rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3)];
    for needle in [
        "cargo install --locked --path .",
        "target/release/toolpulse",
        "minutes",
        "GB",
    ] {
        assert!(
            quickstart.contains(needle),
            "no {needle:?} in:\n{quickstart}"
        );
    }
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

#[test]
fn the_demo_prints_the_slow_tools_progress_before_its_result() {
    let out = toolpulse(&["demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?}:\n{text}"))
    };
    // The demo's MCP server reported four steps; toolpulse's MCP front carried them into the
    // stream, numbered with the rest, while the gateway still waited for the result.
    let steps: Vec<usize> = (1..=4)
        .map(|k| {
            line_of(&format!(
                "response.mcp_call.progress  github_search_issues  \"step {k}/4: "
            ))
        })
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "in order:\n{text}");
    // By default (profile `hosted`) the result is the hosted item's, done with its output.
    let result = line_of("output \"3 open issues mention streaming");
    let started = line_of("response.mcp_call.in_progress  github_search_issues");
    assert!(started < steps[0] && steps[3] < result, "{text}");
    for &step in &steps {
        let line = text.lines().nth(step).unwrap_or_default();
        assert!(line.contains('#'), "numbered: {line}");
    }
    assert!(
        text.contains("response.mcp_call.failed  github_create_issue"),
        "{text}"
    );
    // What a client of a default toolpulse sees: hosted items with toolpulse's ids in place of
    // the gateway's function_call items and their outputs.
    for hosted in ["\"web_search_call\" \"tph_", "\"mcp_call\" \"tph_"] {
        assert!(text.contains(hosted), "{hosted}:\n{text}");
    }
    assert!(!text.contains("function_call"), "{text}");
}

#[test]
fn the_demo_shows_other_profiles_when_asked() {
    let out = toolpulse(&["demo", "--profiles", "openai,progress"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // `openai` keeps the gateway's items and adds a companion beside each.
    assert!(text.contains("function_call_output"), "{text}");
    assert!(text.contains("\"mcp_call\" \"tp_call_"), "{text}");
    assert!(!text.contains("tph_"), "{text}");
    let out = toolpulse(&["demo", "--profiles", "robot"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--profiles"), "{}", stderr(&out));
}

#[test]
fn config_errors_name_the_file_and_the_type_in_words() {
    let dir = temp_dir("named");
    let path = dir.join("typed.toml");
    std::fs::write(&path, "[heartbeat]\ninterval_ms = \"10s\"\n").expect("write");
    let out = toolpulse(&["check", path.to_str().expect("path")]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("expected a whole number (0 or more)"), "{err}");
    assert!(!err.contains("u64"), "serde's name for it: {err}");
    // A file the user never typed: the variable that named it is said too.
    let out = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(["--upstream", "http://127.0.0.1:9"])
        .env("TOOLPULSE_CONFIG", &path)
        .output()
        .expect("run toolpulse");
    assert!(!out.status.success());
    let err = stderr(&out);
    let named = format!("TOOLPULSE_CONFIG names: {}: invalid config", path.display());
    assert!(err.contains(&named), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn check_shows_the_addresses_and_upstream_given_before_it() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/toolpulse.toml");
    // As the image's ENTRYPOINT runs `docker run IMAGE check FILE`.
    let args = [
        "--listen",
        "0.0.0.0:8080",
        "--admin-listen",
        "0.0.0.0:9464",
        "check",
        config,
    ];
    let out = toolpulse(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("proxy: listen 0.0.0.0:8080 -> upstream (none"),
        "{text}"
    );
    assert!(text.contains("admin: listen 0.0.0.0:9464"), "{text}");
    assert!(!text.contains("warning"), "{text}");

    let out = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(["check", config])
        .env("TOOLPULSE_UPSTREAM", "http://gw:9000/v1/")
        .env_remove("TOOLPULSE_LISTEN")
        .output()
        .expect("run toolpulse");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("proxy: listen 127.0.0.1:8080 -> upstream http://gw:9000/v1/"),
        "{text}"
    );
    assert!(
        text.contains("warning: the upstream http://gw:9000/v1 ends in /v1")
            && text.contains("goes to http://gw:9000/v1/v1/responses")
            && text.contains("give the upstream without it: http://gw:9000\n"),
        "{text}"
    );
}

#[test]
fn an_address_without_a_host_is_answered_with_examples() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/toolpulse.toml");
    for args in [
        &["--listen", "8183", "check", config][..],
        &[
            "--admin-listen",
            ":8183",
            "--upstream",
            "http://127.0.0.1:9",
        ],
        &["demo", "--web", "--listen", "8183"],
    ] {
        let out = toolpulse(args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("give 127.0.0.1:8183 (this machine only) or 0.0.0.0:8183"),
            "{args:?}: {err}"
        );
    }
    let out = toolpulse(&["health", "--admin", "localhost"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("such as 127.0.0.1:8080"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_taken_admin_port_says_how_to_pick_another() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin = taken.local_addr().expect("addr").to_string();
    let args = [
        "--upstream",
        "http://127.0.0.1:9",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        &admin,
    ];
    let out = toolpulse(&args);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot listen on {admin} for the admin endpoints"))
            && err.contains("--admin-listen ADDR"),
        "{err}"
    );
}

/// A config error never prints a secret: a syntax error on a secret's line
/// (a token, a collector header, a bus URL with a password, a misspelt key) is said by line
/// and column only, and an OTLP endpoint with a password in it is refused without echoing it.
#[test]
fn config_errors_never_print_a_secret() {
    let dir = temp_dir("secrets");
    let path = dir.join("secret.toml");
    for text in [
        "[progress]\ntoken = \"SUPERSECRET-0123456789\" x\n",
        "[telemetry.headers]\nAuthorization = \"Basic SUPERSECRET\" x\n",
        "[progress]\nbus = \"redis://:SUPERSECRET@redis:6379\" x\n",
        "[progress]\ntokn = \"SUPERSECRET-0123456789\" x\n",
        "[hosted]\nkey = \"SUPERSECRET\nmax_entries = 3\n",
        "[telemetry]\notlp_endpoint = \"http://user:SUPERSECRET@127.0.0.1:4318\"\n",
    ] {
        std::fs::write(&path, text).expect("write");
        let out = toolpulse(&["check", path.to_str().expect("path")]);
        assert!(!out.status.success(), "{text}");
        let err = stderr(&out);
        assert!(!err.contains("SUPERSECRET"), "{text}: {err}");
        assert!(err.contains("line 2"), "still says where: {err}");
    }
    // A line that holds no secret is still quoted.
    std::fs::write(&path, "[heartbeat]\ninterval_ms = 10s\n").expect("write");
    let err = stderr(&toolpulse(&["check", path.to_str().expect("path")]));
    assert!(err.contains("interval_ms = 10s"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
