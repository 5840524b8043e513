//! `toolpulse demo`: a scripted antwort-shaped gateway on a loopback port, the proxy in front of
//! it, and one streaming request through the proxy whose events are printed as they arrive —
//! the ones toolpulse injected marked, so the tool progress is visible seconds before results.
//! `toolpulse demo --web` serves a page that shows the same in a browser ([`web`]).

mod gateway;
mod mcp;
mod mcp_client;
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
use crate::core::profiles::Profile;
use crate::core::sse::{Item, Parser};
use crate::features::mcp::Front;
use crate::features::progress::local::LocalHub;
use crate::{net::server, proxy::Proxy};

/// antwort's failure phrases and an MCP rule, heartbeats every second so they show, the default
/// presentation (`hosted`) with the `progress` profile so the slow tool's steps reach the
/// stream, and the demo's MCP server behind toolpulse's MCP front (`{mcp}` is its address).
const DEMO_CONFIG: &str = r#"
[[tools]]
match = ["github_*"]
kind = "mcp"
server_label = "github"
[failure]
output_patterns = ["^no executor found for tool ", "^search failed: ", "^invalid arguments: "]
[heartbeat]
interval_ms = 1000
[events]
profiles = ["hosted", "progress"]
[mcp]
listen = "127.0.0.1:0"
[[mcp.servers]]
name = "github"
upstream = "http://{mcp}/mcp"
call_name = "github_{tool}"
"#;

/// The scripted gateway, the demo's MCP server, and toolpulse in front of both (the proxy and
/// the MCP front), all on loopback ports, running until the runtime stops.
struct Stack {
    gateway: SocketAddr,
    proxy: SocketAddr,
    mcp_front: SocketAddr,
}

/// The profiles the demo runs unless told others: what a client of a default toolpulse sees, and
/// the tools' own progress.
pub const DEFAULT_PROFILES: &str = "hosted,progress";

impl Stack {
    /// `profiles` replaces the config's `[events] profiles` when given (`demo --profiles`).
    async fn start(turn: gateway::Turn, profiles: Option<&str>) -> anyhow::Result<Stack> {
        let step = match turn {
            gateway::Turn::Terminal => gateway::TERMINAL_STEP_MS,
            gateway::Turn::Web => gateway::SLOW_TOOL_MS / mcp::SEARCH_STEPS.len() as u64,
        };
        let (mcp_listener, mcp_server) = mcp::bind().await?;
        tokio::spawn(mcp::serve(mcp_listener, Duration::from_millis(step)));

        let text = DEMO_CONFIG.replace("{mcp}", &mcp_server.to_string());
        let mut config = Config::from_toml_str(&text).context("demo config")?;
        if let Some(list) = profiles {
            let picked = crate::core::profiles::parse_list(list, &Profile::ALL)
                .map_err(|e| anyhow::anyhow!("--profiles: {e}"))?;
            crate::core::profiles::check_combination(&picked)
                .map_err(|e| anyhow::anyhow!("--profiles: {e}"))?;
            config.events.profiles = picked;
        }
        let front_listener = TcpListener::bind("127.0.0.1:0").await?;
        let mcp_front = front_listener.local_addr()?;
        let gateway = TcpListener::bind("127.0.0.1:0").await?;
        let gateway_addr = gateway.local_addr()?;
        let client = mcp_client::McpClient::new(format!("http://{mcp_front}/github"));
        tokio::spawn(gateway::serve(gateway, turn, client));

        config.proxy.upstream = Some(format!("http://{gateway_addr}").parse()?);
        let config = Arc::new(config);
        let hub = LocalHub::new(config.progress.bind_window);
        let proxy = Proxy::new(config.clone())?.with_progress(hub.clone());
        let front = Front::new(&config, hub, proxy.metrics().clone())?
            .context("the demo config has an [mcp] section")?;
        tokio::spawn(crate::features::mcp::server::serve(
            front_listener,
            Arc::new(front),
            std::future::pending(),
        ));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy_addr = listener.local_addr()?;
        tokio::spawn(server::serve(
            listener,
            Arc::new(proxy),
            std::future::pending(),
        ));
        Ok(Stack {
            gateway: gateway_addr,
            proxy: proxy_addr,
            mcp_front,
        })
    }
}

/// Runs the demo with `profiles` (e.g. `openai,progress`), or [`DEFAULT_PROFILES`].
pub async fn run(profiles: Option<&str>) -> anyhow::Result<()> {
    let Stack {
        gateway: gateway_addr,
        proxy: proxy_addr,
        mcp_front,
    } = Stack::start(gateway::Turn::Terminal, profiles).await?;
    let profiles = profiles.unwrap_or(DEFAULT_PROFILES);

    let style = Style::new();
    let banner = [
        "toolpulse demo".to_string(),
        format!(
            "  scripted gateway (antwort-shaped) on http://{gateway_addr}: a web search (1.5 s),"
        ),
        "  a slow MCP tool that reports its four steps, an MCP call that fails, then the answer"
            .to_string(),
        format!("  toolpulse on http://{proxy_addr} in front of it; the gateway reaches its MCP"),
        format!("  server through toolpulse's MCP front on http://{mcp_front}/github\n"),
        format!("  profiles: {profiles} (another: toolpulse demo --profiles openai,progress)\n"),
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
    fn event(&mut self, event: &crate::core::sse::Event) -> std::io::Result<()> {
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
        // toolpulse's items: `tph_…` (hosted, in place of the gateway's call and output) and
        // `tp_…` (openai's companions beside them).
        let companion = json["item"]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("tp_") || id.starts_with("tph_"));
        let injected = companion
            || [
                ".web_search_call.",
                ".mcp_call.",
                ".mcp_call_arguments.",
                ".file_search_call.",
            ]
            .iter()
            .any(|k| kind.contains(k));
        if injected {
            self.injected += 1;
            let mut detail = json["name"].as_str().unwrap_or_default().to_string();
            if companion {
                let item = &json["item"];
                detail = format!("{} {} ({})", item["type"], item["id"], item["status"]);
                if let Some(output) = item["output"].as_str() {
                    detail += &format!("  output {:?}", snippet(output));
                }
            }
            if let Some(outcome) = json["outcome"].as_str() {
                detail += &format!("  outcome={outcome} duration_ms={}", json["duration_ms"]);
            }
            if kind.ends_with(".progress") {
                detail += &format!("  {}", progress(&json));
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

/// A progress event's message as the tool reported it, else its "progress/total".
fn progress(json: &Value) -> String {
    if let Some(message) = json["message"].as_str() {
        return format!("{message:?}");
    }
    match json.get("total") {
        Some(total) => format!("{}/{total}", json["progress"]),
        None => json["progress"].to_string(),
    }
}

/// The start of a tool's output, on one line.
fn snippet(output: &str) -> String {
    let start: String = output.chars().take(60).collect();
    start.replace('\n', " ")
}

fn detail(json: &Value) -> String {
    let item = &json["item"];
    match item["type"].as_str() {
        Some("function_call") => format!(
            "function_call {}",
            item["name"].as_str().unwrap_or_default()
        ),
        Some("function_call_output") => {
            let output = snippet(item["output"].as_str().unwrap_or_default());
            format!("function_call_output {output:?}")
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
