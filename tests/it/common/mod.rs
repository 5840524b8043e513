//! Helpers shared by the integration tests: fixtures and running the rewriter over chunks.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use toolpulse::{Config, Rewriter};

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The hand-made fixtures (`tests/fixtures/*.sse`, without the expected `*.out.sse`) and the
/// recorded streams under `tests/fixtures/recordings/`, as paths relative to the fixtures dir.
pub fn all_inputs() -> Vec<String> {
    let mut names = Vec::new();
    for dir in [
        "",
        "recordings/openai",
        "recordings/litellm",
        "recordings/litellm-1.108.7",
    ] {
        let entries = std::fs::read_dir(fixtures_dir().join(dir)).expect("fixtures dir");
        for entry in entries {
            let name = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name.ends_with(".sse") && !name.ends_with(".out.sse") {
                names.push(if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                });
            }
        }
    }
    names.sort();
    names
}

/// The config beside a hand-made fixture (`x.toml` for `x.sse`), else the defaults.
/// The `[hosted] key` of every fixture config (profiles.toml names the same one), so the
/// goldens' hosted ids do not change from run to run.
pub const FIXTURES_KEY: &str = "the fixtures key, not a secret";

pub fn config_for(input: &str) -> Config {
    let path = fixtures_dir().join(input.replace(".sse", ".toml"));
    let mut config = if path.exists() {
        Config::load(&path).expect("fixture config is valid")
    } else {
        Config::default()
    };
    config.hosted.key = toolpulse::features::hosted::id::Key::new(FIXTURES_KEY.as_bytes());
    config
}

pub fn config_file(name: &str) -> Config {
    let mut config = Config::load(&fixtures_dir().join(name)).expect("fixture config is valid");
    config.hosted.key = toolpulse::features::hosted::id::Key::new(FIXTURES_KEY.as_bytes());
    config
}

/// The wall-clock time the tests' rewriters are anchored at (2025-12-20T12:34:56.123Z).
pub fn fixed_wall_clock() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_766_234_096_123)
}

/// Feeds `input` in the given chunks at one fixed instant; returns the whole output.
pub fn rewrite_chunks<'a>(
    config: &Arc<Config>,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    now: Instant,
) -> Vec<u8> {
    let mut rewriter = Rewriter::new(config.settings()).with_wall_clock(fixed_wall_clock(), now);
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&rewriter.feed(chunk, now));
    }
    out.extend_from_slice(&rewriter.finish(now));
    out
}

pub fn rewrite_whole(config: &Arc<Config>, input: &[u8], now: Instant) -> Vec<u8> {
    rewrite_chunks(config, [input], now)
}

/// Splits `input` at the given sorted offsets.
pub fn split_at<'a>(input: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for &p in points {
        chunks.push(&input[start..p]);
        start = p;
    }
    chunks.push(&input[start..]);
    chunks
}

pub mod cut;
pub mod gateway;
pub mod otlp;
pub mod redis_server;
pub mod steps;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use toolpulse::{net::server, proxy::Proxy};

/// Starts a proxy in front of `upstream` on a loopback port; it runs until the test ends.
pub async fn start_proxy(config: Config, upstream: &str) -> std::net::SocketAddr {
    start_proxy_with_handle(config, upstream).await.0
}

pub async fn start_proxy_with_handle(
    mut config: Config,
    upstream: &str,
) -> (std::net::SocketAddr, Arc<Proxy>) {
    config.proxy.upstream = Some(upstream.parse().expect("upstream URL"));
    let proxy = Arc::new(Proxy::new(Arc::new(config)).expect("proxy"));
    (serve_proxy(proxy.clone()).await, proxy)
}

/// Serves `proxy` on a loopback port until the test ends.
pub async fn serve_proxy(proxy: Arc<Proxy>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(server::serve(listener, proxy, std::future::pending()));
    addr
}

pub type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

pub fn http_client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

pub async fn post(
    client: &HttpClient,
    url: String,
    body: &'static str,
) -> http::Response<Incoming> {
    let request = http::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("request");
    client.request(request).await.expect("response")
}

/// The JSON body of an error answer (the proxy's own, OpenAI-style).
pub async fn json_body(response: http::Response<Incoming>) -> serde_json::Value {
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    serde_json::from_slice(&body).expect("a JSON body")
}

/// Reads a whole body, frame by frame, with a time limit so a hang fails the test.
pub async fn read_all(body: &mut Incoming) -> Vec<u8> {
    let mut out = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.expect("body frame").into_data() {
                out.extend_from_slice(&data);
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), read)
        .await
        .expect("the body ends");
    out
}

/// Reads until `needle` has arrived; returns everything read so far.
pub async fn read_until(body: &mut Incoming, needle: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let read = async {
        while !String::from_utf8_lossy(&out).contains(needle) {
            let frame = body.frame().await.expect("more body").expect("body frame");
            if let Ok(data) = frame.into_data() {
                out.extend_from_slice(&data);
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), read)
        .await
        .unwrap_or_else(|_| panic!("{needle:?} never arrived"));
    out
}

/// The SSE blocks of `input`, each as its raw bytes.
pub fn blocks(input: &[u8]) -> Vec<Vec<u8>> {
    let mut parser = toolpulse::core::sse::Parser::new(usize::MAX);
    parser.push(input);
    parser.finish();
    std::iter::from_fn(|| parser.next_item())
        .map(|item| match item {
            toolpulse::core::sse::Item::Event(e) => e.raw().to_vec(),
            toolpulse::core::sse::Item::Oversize(b) | toolpulse::core::sse::Item::Incomplete(b) => {
                b.to_vec()
            }
        })
        .collect()
}

/// A stream's text made comparable across runs: `"duration_ms":N` becomes 0, and each hosted
/// item id keeps its call id but loses the stream's nonce and the MAC (each stream has its own).
pub fn comparable(bytes: &[u8]) -> String {
    use std::sync::LazyLock;
    static DURATION: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r#""duration_ms":\d+"#).expect("regex"));
    static HOSTED_ID: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(tph_[A-Za-z0-9_-]+)\.[A-Za-z0-9_-]{32}").expect("regex")
    });
    let text = String::from_utf8_lossy(bytes);
    let text = DURATION.replace_all(&text, r#""duration_ms":0"#);
    HOSTED_ID.replace_all(&text, "$1").into_owned()
}
