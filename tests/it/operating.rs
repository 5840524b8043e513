//! Operating toolpulse, over real sockets: metrics after a tool stream, overload, and — with
//! the real binary and real signals — readiness during drain, a drain that ends a stuck stream
//! with its calls closed, SIGHUP reloads (valid: new streams use it; invalid: refused, on one
//! log line), the one line per name about a tool the gateway ran without a `[[tools]]` rule
//! (and the rule to paste), and an upstream URL ending in /v1: warned at start, and its 404s
//! logged with the URL the upstream was asked for.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use common::gateway::{Gateway, Reply, held_reply};
use common::*;
use http_body_util::BodyExt;
use tokio::sync::Notify;
use toolpulse::Config;
use toolpulse::app::admin::{self, Admin};

const REQUEST: &str = r#"{"model":"m","input":"hi","stream":true}"#;

async fn get(url: String) -> (u16, String) {
    let response = http_client()
        .get(url.parse().expect("uri"))
        .await
        .expect("response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_a_tool_stream() {
    let gw =
        Gateway::start(|_| Reply::sse(vec![read(&fixtures_dir().join("parallel_reversed.sse"))]))
            .await;
    let (proxy_addr, proxy) =
        start_proxy_with_handle(config_for("parallel_reversed.sse"), &gw.url()).await;
    let admin = Arc::new(Admin::new(proxy.metrics().clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let admin_addr = listener.local_addr().expect("addr");
    tokio::spawn(admin::serve(
        listener,
        admin.clone(),
        Default::default(),
        16,
        std::future::pending(),
    ));

    assert_eq!(get(format!("http://{admin_addr}/healthz")).await.0, 200);
    assert_eq!(
        get(format!("http://{admin_addr}/readyz")).await.0,
        503,
        "not ready yet"
    );
    admin.set_ready(true);
    assert_eq!(get(format!("http://{admin_addr}/readyz")).await.0, 200);

    let response = post(
        &http_client(),
        format!("http://{proxy_addr}/v1/responses"),
        REQUEST,
    )
    .await;
    read_all(&mut response.into_body()).await;
    // The stream is counted when its body is dropped, after the client read it: poll.
    let lines = [
        r#"toolpulse_streams_total{outcome="completed"} 1"#,
        "toolpulse_streams_active 0",
        r#"toolpulse_tool_calls_total{kind="web_search",outcome="failed"} 1"#,
        r#"toolpulse_tool_calls_total{kind="mcp",outcome="completed"} 1"#,
        r#"toolpulse_tool_duration_seconds_count{kind="mcp"} 1"#,
        r#"toolpulse_events_injected_total{type="response.web_search_call.searching"} 1"#,
        r#"toolpulse_events_injected_total{type="response.mcp_call.completed"} 1"#,
        r#"toolpulse_requests_total{response="rewritten"} 1"#,
        "toolpulse_events_uninterpreted_total 0",
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, text) = get(format!("http://{admin_addr}/metrics")).await;
        assert_eq!(status, 200);
        let missing = lines.iter().find(|line| !text.contains(*line));
        let Some(missing) = missing else {
            break;
        };
        assert!(
            std::time::Instant::now() < deadline,
            "missing {missing:?} in\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_answers_503_with_an_openai_style_error() {
    let release = Arc::new(Notify::new());
    let gw = Gateway::start(held_reply("web_search.sse", release.clone())).await;
    let mut config = Config::default();
    config.proxy.max_connections = 1;
    let (proxy_addr, proxy) = start_proxy_with_handle(config, &gw.url()).await;
    let first = post(
        &http_client(),
        format!("http://{proxy_addr}/v1/responses"),
        REQUEST,
    )
    .await;
    let mut first = first.into_body();
    read_until(&mut first, "web_search_call.searching").await;

    let second = post(
        &http_client(),
        format!("http://{proxy_addr}/v1/responses"),
        REQUEST,
    )
    .await;
    assert_eq!(second.status(), 503);
    let json = json_body(second).await;
    assert_eq!(json["error"]["code"], "overloaded");
    assert!(
        proxy
            .metrics()
            .encode()
            .contains("toolpulse_connections_rejected_total 1")
    );

    release.notify_one();
    let rest = read_all(&mut first).await;
    assert!(
        String::from_utf8_lossy(&rest).contains("web_search_call.completed"),
        "the first stream is unharmed"
    );
}

/// The real binary, with its stderr lines collected.
struct Running {
    child: Child,
    lines: std_mpsc::Receiver<String>,
    /// The lines before "toolpulse listening" (warnings about the config).
    startup: Vec<String>,
    proxy: String,
    admin: String,
}

impl Running {
    fn start(config: &std::path::Path, upstream: &str) -> Running {
        Running::start_logging(config, upstream, "info")
    }

    fn start_logging(config: &std::path::Path, upstream: &str, level: &str) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
            .args([
                "--config",
                config.to_str().expect("path"),
                "--upstream",
                upstream,
            ])
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .env("RUST_LOG", level)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolpulse");
        let (tx, lines) = std_mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut startup = Vec::new();
        let first = loop {
            let line = lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("no \"toolpulse listening\" line: {startup:#?}"));
            if line.contains("toolpulse listening") {
                break line;
            }
            startup.push(line);
        };
        let field = |name: &str| {
            let start = first.find(&format!("{name}=")).expect(name) + name.len() + 1;
            first[start..]
                .split_whitespace()
                .next()
                .expect("value")
                .to_string()
        };
        let (proxy, admin) = (field("listen"), field("admin"));
        Running {
            child,
            lines,
            startup,
            proxy,
            admin,
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// The log lines up to a marker request's, sent now: a later request that was seen, so
    /// whatever earlier requests logged (they were answered, their bodies read, before it was
    /// sent) is in, stragglers included. Its own lines are left out.
    async fn lines_until_marker(&self) -> Vec<String> {
        const MARKER: &str = "/toolpulse-test-marker";
        let request = http::Request::get(format!("http://{}{MARKER}", self.proxy))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .expect("request");
        let response = http_client().request(request).await.expect("response");
        read_all(&mut response.into_body()).await;
        let mut lines = self.lines_until(&format!("path={MARKER}"));
        lines.retain(|l| !l.contains(MARKER));
        lines
    }

    /// Waits for a log line containing `needle`.
    fn log_line(&self, needle: &str) -> String {
        self.lines_until(needle).pop().expect("the line itself")
    }

    /// The log lines up to and including the first one containing `needle`.
    fn lines_until(&self, needle: &str) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("no log line with {needle:?}"));
            let found = line.contains(needle);
            lines.push(line);
            if found {
                return lines;
            }
        }
    }

    fn wait_exit(&mut self) -> i32 {
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("toolpulse did not exit");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn temp_config(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolpulse-op-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("toolpulse.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_readiness_flips_and_stuck_streams_end_with_calls_closed() {
    let release = Arc::new(Notify::new());
    let gw = Gateway::start(held_reply("web_search.sse", release.clone())).await;
    let config = temp_config("drain", "[proxy]\ndrain_timeout_ms = 700\n");
    let mut tp = Running::start(&config, &gw.url());
    assert_eq!(get(format!("http://{}/readyz", tp.admin)).await.0, 200);
    let response = post(
        &http_client(),
        format!("http://{}/v1/responses", tp.proxy),
        REQUEST,
    )
    .await;
    let mut body = response.into_body();
    read_until(&mut body, "web_search_call.searching").await;

    tp.signal("TERM");
    tp.log_line("draining");
    assert_eq!(
        get(format!("http://{}/readyz", tp.admin)).await.0,
        503,
        "not ready while draining"
    );
    // The tool never finishes: after the drain timeout the proxy closes the call and ends.
    let rest = read_all(&mut body).await;
    let text = String::from_utf8_lossy(&rest);
    assert!(
        text.contains("\"type\":\"response.web_search_call.completed\""),
        "{text}"
    );
    assert!(text.contains("\"outcome\":\"failed\""), "{text}");
    let done = text
        .split("\n\n")
        .find(|e| e.contains("\"type\":\"response.output_item.done\""))
        .unwrap_or_default();
    assert!(
        done.contains("\"id\":\"tph_") && done.contains("\"status\":\"failed\""),
        "the open hosted item is done, failed: {text}"
    );
    assert_eq!(tp.wait_exit(), 0);
    release.notify_one();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reload_applies_to_new_streams_only_and_bad_configs_are_refused() {
    let release = Arc::new(Notify::new());
    let gw = Gateway::start(held_reply("mcp_success.sse", release.clone())).await;
    let config = temp_config("reload", "[heartbeat]\ninterval_ms = 0\n");
    let tp = Running::start(&config, &gw.url());
    let client = http_client();

    // Stream 1 starts under the first config, where github_* is a plain function.
    let mut first = post(
        &client,
        format!("http://{}/v1/responses", tp.proxy),
        REQUEST,
    )
    .await
    .into_body();
    read_until(&mut first, "\"type\":\"response.output_item.done\"").await;

    std::fs::write(
        &config,
        "[[tools]]\nmatch = [\"github_*\"]\nkind = \"mcp\"\n",
    )
    .expect("write");
    tp.signal("HUP");
    let lines = tp.lines_until("config reloaded");
    assert!(
        !lines.iter().any(|l| l.contains("need a restart")),
        "the --listen/--upstream flags are not a change of the file: {lines:?}"
    );
    let mut second = post(
        &client,
        format!("http://{}/v1/responses", tp.proxy),
        REQUEST,
    )
    .await
    .into_body();
    read_until(&mut second, "response.mcp_call.in_progress").await;

    std::fs::write(
        &config,
        "[[tools]]\nmatch = [\"github_*\"]\nkind = \"robot\"\n",
    )
    .expect("write");
    tp.signal("HUP");
    let refused = tp.log_line("config reload rejected");
    assert!(refused.contains("line 3"), "names the line: {refused}");
    // The whole error on that one line: log pipelines take a line per entry.
    assert!(
        refused.contains("unknown variant `robot`") && refused.contains("(in `kind = \"robot\"`)"),
        "{refused}"
    );
    let (_, metrics) = get(format!("http://{}/metrics", tp.admin)).await;
    assert!(
        metrics.contains(r#"toolpulse_config_reloads_total{outcome="rejected"} 1"#),
        "{metrics}"
    );

    // Both held replies may not have reached their wait yet: released until both have ended.
    let releaser = tokio::spawn({
        let release = release.clone();
        async move {
            loop {
                release.notify_waiters();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let first = String::from_utf8_lossy(&read_all(&mut first).await).into_owned();
    assert!(
        !first.contains("mcp_call"),
        "a stream keeps the config it started with: {first}"
    );
    let second = String::from_utf8_lossy(&read_all(&mut second).await).into_owned();
    releaser.abort();
    assert!(second.contains("response.mcp_call.completed"), "{second}");

    let mut third = post(
        &client,
        format!("http://{}/v1/responses", tp.proxy),
        REQUEST,
    )
    .await
    .into_body();
    release.notify_one();
    let third = String::from_utf8_lossy(&read_all(&mut third).await).into_owned();
    assert!(
        third.contains("response.mcp_call.completed"),
        "the valid config stayed: {third}"
    );

    // The MCP listener and the progress registry are built once: changing them needs a restart.
    std::fs::write(
        &config,
        "[[tools]]\nmatch = [\"github_*\"]\nkind = \"mcp\"\n[mcp]\nlisten = \"127.0.0.1:0\"\n\
         [progress]\nbind_window_ms = 10\n",
    )
    .expect("write");
    tp.signal("HUP");
    let lines = tp.lines_until("config reloaded");
    let warning = lines
        .iter()
        .find(|l| l.contains("need a restart"))
        .unwrap_or_else(|| panic!("a restart warning: {lines:?}"));
    assert!(
        warning.contains("[mcp]") && warning.contains("bind_window_ms"),
        "{warning}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_heads_are_refused() {
    let mut gw = Gateway::start(|_| Reply::sse(vec![b"data: {}\n\n".to_vec()])).await;
    let mut config = Config::default();
    config.proxy.max_header_bytes = 16 * 1024;
    let proxy = start_proxy(config, &gw.url()).await;
    let request = |size: usize| {
        http::Request::get(format!("http://{proxy}/v1/models"))
            .header("x-big", "a".repeat(size))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .expect("request")
    };
    let ok = http_client()
        .request(request(1024))
        .await
        .expect("response");
    assert_eq!(ok.status(), 200);
    assert!(gw.requests.recv().await.is_some());
    let refused = http_client()
        .request(request(64 * 1024))
        .await
        .expect("an answer");
    assert_eq!(refused.status(), 431, "Request Header Fields Too Large");
    assert!(gw.requests.try_recv().is_err(), "never forwarded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_logs_even_at_trace_level() {
    let input = read(&fixtures_dir().join("secret_args.sse"));
    let gw = Gateway::start(move |_| Reply::sse(vec![input.clone()])).await;
    let config = std::fs::read_to_string(fixtures_dir().join("secret_args.toml")).expect("toml");
    let config = temp_config("secrets", &config);
    let tp = Running::start_logging(&config, &gw.url(), "trace");
    let secrets = [
        "sk-query-secret",
        "sk-header-secret",
        "sk-apikey-secret",
        "sk-cookie-secret",
        "sk-body-secret",
        "sk-live-123", // in the tool's arguments, from the upstream
    ];
    let request = http::Request::post(format!(
        "http://{}/v1/responses?key=sk-query-secret",
        tp.proxy
    ))
    .header("authorization", "Bearer sk-header-secret")
    .header("x-api-key", "sk-apikey-secret")
    .header("cookie", "session=sk-cookie-secret")
    .body(http_body_util::Full::new(bytes::Bytes::from_static(
        br#"{"model":"m","input":"sk-body-secret","stream":true}"#,
    )))
    .expect("request");
    let response = http_client().request(request).await.expect("response");
    let out = read_all(&mut response.into_body()).await;
    assert!(String::from_utf8_lossy(&out).contains("response.mcp_call.completed"));
    let mut lines = tp.lines_until("path=/v1/responses");
    lines.extend(tp.lines_until_marker().await);
    let traced = lines.iter().filter(|l| l.contains(" TRACE ")).count();
    assert!(traced > 0, "trace level was on: {lines:?}");
    for line in &lines {
        for secret in secrets {
            assert!(!line.contains(secret), "{secret} logged: {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_gateway_ran_without_a_rule_is_logged_once_per_name() {
    // get_weather: a function_call whose output the gateway sent, and no [[tools]] rule for it.
    let input = read(&fixtures_dir().join("function_untouched.sse"));
    let gw = Gateway::start(move |_| Reply::sse(vec![input.clone()])).await;
    let config = temp_config(
        "unconfigured",
        "[[tools]]\nmatch = [\"github_*\"]\nkind = \"mcp\"\n",
    );
    let tp = Running::start(&config, &gw.url());
    for _ in 0..2 {
        let response = post(
            &http_client(),
            format!("http://{}/v1/responses", tp.proxy),
            REQUEST,
        )
        .await;
        read_all(&mut response.into_body()).await;
    }
    // The request lines are written when a body is dropped: wait for both, then for stragglers
    // (up to a later request's line).
    let mut lines = tp.lines_until("path=/v1/responses");
    lines.extend(tp.lines_until("path=/v1/responses"));
    lines.extend(tp.lines_until_marker().await);
    let advice: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("has no [[tools]] rule"))
        .collect();
    assert_eq!(advice.len(), 1, "once for two calls: {lines:#?}");
    let line = advice[0];
    assert!(line.contains(" INFO "), "{line}");
    assert!(
        line.contains(
            r#"tool "get_weather" has no [[tools]] rule and was treated as a generic function"#
        ) && line.ends_with("add to the config:"),
        "{line}"
    );
    // Then the rule, as lines to paste.
    let at = lines.iter().position(|l| l == line).expect("the line");
    assert_eq!(
        lines[at + 1..at + 4],
        ["[[tools]]", r#"match = ["get_weather"]"#, r#"kind = "mcp""#],
        "{lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_ending_in_v1_is_warned_about_and_its_404_names_the_url() {
    let gw = Gateway::start(|_| Reply {
        head:
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ntransfer-encoding: chunked"
                .into(),
        actions: vec![
            common::gateway::Action::Chunk(b"{}".to_vec()),
            common::gateway::Action::End,
        ],
    })
    .await;
    let config = temp_config("v1", "");
    // As the README's OPENAI_BASE_URL invites: the gateway's base URL with its /v1.
    let upstream = format!("{}/v1", gw.url());
    let tp = Running::start(&config, &upstream);
    let warning = tp.startup.iter().find(|l| l.contains(" WARN "));
    let warning = warning.unwrap_or_else(|| panic!("no warning: {:#?}", tp.startup));
    assert!(
        warning.contains(&format!("{upstream}/v1/responses"))
            && warning.contains(&format!("give the upstream without it: {}", gw.url())),
        "{warning}"
    );
    let response = post(
        &http_client(),
        format!("http://{}/v1/responses", tp.proxy),
        REQUEST,
    )
    .await;
    assert_eq!(response.status(), 404);
    read_all(&mut response.into_body()).await;
    let line = tp.log_line("path=/v1/responses");
    assert!(
        line.contains("status=404")
            && line.contains(&format!("upstream_url={upstream}/v1/responses")),
        "{line}"
    );
}

/// A tool name from the upstream with CR, LF and ESC cannot forge a log line or
/// send terminal escapes: the debug `tool call` line writes it escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_name_with_line_breaks_cannot_forge_a_log_line() {
    let input = String::from_utf8(read(&fixtures_dir().join("mcp_success.sse"))).expect("utf-8");
    let evil = r#"github_x\r\n2026-01-01T00:00:00Z  INFO FORGED line\u001b[31m"#;
    let input = input.replace("github_search_issues", evil).into_bytes();
    assert!(
        input.windows(6).any(|w| w == b"FORGED"),
        "the fixture names the tool"
    );
    let gw = Gateway::start(move |_| Reply::sse(vec![input.clone()])).await;
    let config = temp_config(
        "forged",
        "[[tools]]\nmatch = [\"github_*\"]\nkind = \"mcp\"\n",
    );
    let tp = Running::start_logging(&config, &gw.url(), "toolpulse=debug");
    let response = post(
        &http_client(),
        format!("http://{}/v1/responses", tp.proxy),
        REQUEST,
    )
    .await;
    read_all(&mut response.into_body()).await;
    let lines = tp.lines_until("path=/v1/responses");
    let call = lines
        .iter()
        .find(|l| l.contains("tool call"))
        .expect("the tool call line");
    assert!(
        call.contains(r#"\r\n"#) && call.contains("FORGED"),
        "{call}"
    );
    for line in &lines {
        assert!(
            !line.starts_with("2026-01-01T00:00:00Z"),
            "forged: {lines:#?}"
        );
        assert!(!line.contains('\u{1b}'), "a terminal escape: {line:?}");
    }
}
