//! Listeners: the send timeout, the sniff of the first bytes, the admin cap, traceparent on the
//! MCP front, request and response edges (lengths, paths, `CONNECT`, `OPTIONS *`). Each test
//! starts the real listeners on `127.0.0.1:0` with small limits and waits for events.

mod admin;
mod caps;
mod edges;
mod send_timeout;
mod sniff;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolpulse::Config;
use toolpulse::app::admin::{self as admin_listener, Admin};
use toolpulse::features::mcp::{Front, server as mcp_server};
use toolpulse::features::progress::local::LocalHub;
use toolpulse::metrics::Metrics;
use toolpulse::proxy::Proxy;

/// Far above every limit set below: what has not happened by then will not.
const PATIENCE: Duration = Duration::from_secs(60);

/// A config for an upstream at `url`, its MCP server `srv` at `{url}/mcp`, small client
/// limits unless `clients` sets them (`key = value` lines), and `extra` appended.
fn config(url: &str, clients: &str, extra: &str) -> Config {
    let mut section = clients.to_string();
    for (key, value) in [
        ("head_timeout_ms", 500),
        ("body_timeout_ms", 2000),
        ("idle_timeout_ms", 2000),
    ] {
        if !clients.contains(key) {
            section.push_str(&format!("\n{key} = {value}"));
        }
    }
    let text = format!(
        "[proxy]\nupstream = \"{url}\"\n[clients]\n{section}\n\
         [[mcp.servers]]\nname = \"srv\"\nupstream = \"{url}/mcp\"\n{extra}"
    );
    Config::from_toml_str(&text).expect("valid config")
}

struct Listeners {
    proxy: SocketAddr,
    mcp: SocketAddr,
    admin: SocketAddr,
    metrics: Arc<Metrics>,
}

/// The proxy, MCP and admin listeners, as `toolpulse::app::serve` starts them.
async fn start(config: Config) -> Listeners {
    let config = Arc::new(config);
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let hub = LocalHub::new(config.progress.bind_window);
    let proxy = Proxy::new(config.clone())
        .expect("proxy")
        .with_progress(hub.clone());
    let front = Front::new(&config, hub, proxy.metrics().clone())
        .expect("front")
        .expect("configured")
        .with_body_budget(proxy.body_budget().clone());
    let metrics = proxy.metrics().clone();
    let (p, m, a) = (bind().await, bind().await, bind().await);
    let (p, m, a) = (p.expect("bind"), m.expect("bind"), a.expect("bind"));
    let addrs = (p.local_addr(), m.local_addr(), a.local_addr());
    let admin = Arc::new(Admin::new(metrics.clone()));
    let (clients, cap) = (config.clients.clone(), config.admin.max_connections);
    let forever = std::future::pending;
    tokio::spawn(admin_listener::serve(a, admin, clients, cap, forever()));
    tokio::spawn(mcp_server::serve(m, Arc::new(front), forever()));
    let proxy = Arc::new(proxy);
    tokio::spawn(toolpulse::net::server::serve(p, proxy, forever()));
    Listeners {
        proxy: addrs.0.expect("addr"),
        mcp: addrs.1.expect("addr"),
        admin: addrs.2.expect("addr"),
        metrics,
    }
}

/// Reads until the peer closes (an end or a reset); what it sent.
async fn until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let read = async {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            seen.extend_from_slice(&buf[..n]);
        }
    };
    if tokio::time::timeout(PATIENCE, read).await.is_err() {
        panic!("still open after {PATIENCE:?}");
    }
    seen
}

/// Sends `request` raw on a new connection and reads the answer until the peer closes.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    String::from_utf8_lossy(&until_closed(&mut stream).await).into_owned()
}

/// The status code of a raw answer.
fn status(answer: &str) -> Option<&str> {
    answer.split_whitespace().nth(1)
}

/// Waits until the metrics hold `line` (polled: the metrics have no signal to wait on).
async fn metric(metrics: &Metrics, line: &str) {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if metrics.encode().contains(line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no {line} in {}", metrics.encode());
}
