//! `toolpulse demo`: a scripted antwort-shaped gateway on a loopback port, the proxy in front of
//! it, and one streaming request through the proxy whose events are printed as they arrive —
//! the ones toolpulse injected marked, so the tool progress is visible seconds before results.
//! `toolpulse demo --web` serves a page that shows the same in a browser ([`web`]).

mod gateway;
pub mod web;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::proxy::{Proxy, server};
use crate::sse::{Item, Parser};

/// antwort's failure phrases and an MCP rule, with heartbeats every second so they show.
const DEMO_CONFIG: &str = r#"
[[tools]]
match = ["github_*"]
kind = "mcp"
[failure]
output_patterns = ["^no executor found for tool ", "^search failed: ", "^invalid arguments: "]
[heartbeat]
interval_ms = 1000
"#;

/// The scripted gateway and toolpulse in front of it, both on loopback ports, running until
/// the runtime stops.
struct Stack {
    gateway: SocketAddr,
    proxy: SocketAddr,
}

impl Stack {
    async fn start(turn: gateway::Turn) -> anyhow::Result<Stack> {
        let gateway = TcpListener::bind("127.0.0.1:0").await?;
        let gateway_addr = gateway.local_addr()?;
        tokio::spawn(gateway::serve(gateway, turn));

        let mut config = Config::from_toml_str(DEMO_CONFIG).context("demo config")?;
        config.proxy.upstream = Some(format!("http://{gateway_addr}").parse()?);
        let proxy = Arc::new(Proxy::new(Arc::new(config))?);
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy_addr = listener.local_addr()?;
        tokio::spawn(server::serve(listener, proxy, std::future::pending()));
        Ok(Stack {
            gateway: gateway_addr,
            proxy: proxy_addr,
        })
    }
}

pub async fn run() -> anyhow::Result<()> {
    let Stack {
        gateway: gateway_addr,
        proxy: proxy_addr,
    } = Stack::start(gateway::Turn::Terminal).await?;

    let style = Style::new();
    let banner = [
        "toolpulse demo".to_string(),
        format!(
            "  scripted gateway (antwort-shaped) on http://{gateway_addr}: a web search that takes"
        ),
        "  1.5 s, an MCP call that fails after 1 s, then the answer".to_string(),
        format!("  toolpulse on http://{proxy_addr} in front of it\n"),
        format!("POST http://{proxy_addr}/v1/responses (stream: true); events as they arrive,"),
        format!("{} = injected by toolpulse:\n\n", style.injected("▶")),
    ];
    say(&banner.join("\n"))?;

    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = http::Request::post(format!("http://{proxy_addr}/v1/responses"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(
            br#"{"model":"demo-model","input":"Find Rust crates for an SSE proxy and file an issue","stream":true}"#,
        )))?;
    let start = Instant::now();
    let response = client
        .request(request)
        .await
        .context("request through the proxy")?;
    anyhow::ensure!(
        response.status().is_success(),
        "proxy answered {}",
        response.status()
    );
    let mut body = response.into_body();
    let mut parser = Parser::new(usize::MAX);
    let mut printer = Printer {
        style,
        start,
        upstream: 0,
        injected: 0,
        heartbeats: 0,
    };
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.context("reading the stream")?.into_data() {
            parser.push(&data);
            while let Some(Item::Event(event)) = parser.next_item() {
                printer.event(&event)?;
            }
        }
    }
    say(&format!(
        "\n{} events from the gateway, {} injected by toolpulse, {} heartbeats, in {:.1} s.\n",
        printer.upstream,
        printer.injected,
        printer.heartbeats,
        start.elapsed().as_secs_f64()
    ))?;
    Ok(())
}

/// Writes `text` to stdout at once. An error (the reader went away: `demo | head`) is returned
/// rather than panicking as `println!` would; `main` ends quietly on a broken pipe.
fn say(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

struct Printer {
    style: Style,
    start: Instant,
    upstream: usize,
    injected: usize,
    heartbeats: usize,
}

impl Printer {
    fn event(&mut self, event: &crate::sse::Event) -> std::io::Result<()> {
        let t = self.start.elapsed();
        let Some(data) = event.data() else {
            if event.has_comment() {
                self.heartbeats += 1;
                self.line(
                    t,
                    "",
                    &self
                        .style
                        .dim(": keep-alive (heartbeat while the tool runs)"),
                )?;
            }
            return Ok(());
        };
        let Ok(json) = serde_json::from_slice::<Value>(&data) else {
            self.upstream += 1;
            return self.line(t, "", &String::from_utf8_lossy(&data));
        };
        let kind = json["type"].as_str().unwrap_or_default();
        let seq = json["sequence_number"]
            .as_u64()
            .map(|n| format!("#{n}"))
            .unwrap_or_default();
        let companion = json["item"]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("tp_"));
        let injected = companion
            || [".web_search_call.", ".mcp_call.", ".file_search_call."]
                .iter()
                .any(|k| kind.contains(k));
        if injected {
            self.injected += 1;
            let mut detail = json["name"].as_str().unwrap_or_default().to_string();
            if companion {
                let item = &json["item"];
                detail = format!("{} {} ({})", item["type"], item["id"], item["status"]);
            }
            if let Some(outcome) = json["outcome"].as_str() {
                detail += &format!("  outcome={outcome} duration_ms={}", json["duration_ms"]);
            }
            let text = format!("▶ {kind}  {detail}");
            self.line(t, &seq, &self.style.injected(&text))
        } else {
            self.upstream += 1;
            self.line(t, &seq, &format!("  {kind}  {}", detail(&json)))
        }
    }

    fn line(&self, t: Duration, seq: &str, text: &str) -> std::io::Result<()> {
        say(&format!("{:>6.2}s {seq:>4}  {text}\n", t.as_secs_f64()))
    }
}

fn detail(json: &Value) -> String {
    let item = &json["item"];
    match item["type"].as_str() {
        Some("function_call") => format!(
            "function_call {}",
            item["name"].as_str().unwrap_or_default()
        ),
        Some("function_call_output") => {
            let output: String = item["output"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(60)
                .collect();
            format!("function_call_output {:?}", output.replace('\n', " "))
        }
        Some(other) => other.to_string(),
        None => json["delta"]
            .as_str()
            .map(|d| format!("{d:?}"))
            .unwrap_or_default(),
    }
}

/// ANSI styling when stdout is a terminal, plain text otherwise.
struct Style {
    color: bool,
}

impl Style {
    fn new() -> Self {
        Style {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn injected(&self, text: &str) -> String {
        if self.color {
            format!("\x1b[1;32m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn dim(&self, text: &str) -> String {
        if self.color {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}
