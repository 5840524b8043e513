//! The load client of the benchmark (`bench/run.sh`): `--concurrency` lanes, each one HTTP/1.1
//! keep-alive connection running streams one after another until `--streams` have been started
//! (or `--duration-s` is over). The stream parameters go to `bench_upstream` in the query string,
//! through whatever proxy `--url` points at. `--http2-connections N`: the lanes share N HTTP/2
//! connections instead (h2c with prior knowledge, lane i on connection i % N), so that 10,000
//! streams take 100 client sockets rather than 10,000 (phase `scale`); a stream that fails ends
//! that stream only (a connection that closes is made again by the next lane that needs it).
//! `--tool-stream-every K`: only stream k with k % K == 0 gets the tool rounds of `--tool-every`.
//!
//! For every received event it checks that `sequence_number`s are dense from 0 (injected events
//! are numbered too) and records the latency from the upstream's `t_ns` stamp to the arrival of
//! the bytes (CLOCK_MONOTONIC on both sides) in an HdrHistogram. A stream also fails when it
//! does not end with `response.completed` or misses upstream events (under profile `hosted`,
//! those of the gateway-run tool rounds are shown as hosted items instead). `--verify` asks the upstream
//! for unstamped events, regenerates the exact upstream bytes and checks the received body with
//! `invariants::check` (the `oracle/` crate). Prints one JSON object to stdout; exits 1 if any
//! stream failed.
//!
//! `--ag-ui`: `--url` is toolpulse's AG-UI endpoint; each stream is a run (a `RunAgentInput`
//! posted, the stream parameters in the query, which toolpulse passes on to the gateway). Its
//! events carry no stamps (no latency), and a stream fails unless it ends with `RUN_FINISHED`;
//! the upstream events counted are those the upstream sent (its parameters say how many).
//! With `--verify` every run is checked by `invariants::ag_ui::check`.
//!
//! ```sh
//! cargo run --release --example bench_client -- --url http://127.0.0.1:8080/v1/responses \
//!     --concurrency 200 --streams 400 --events 250 --pace-us 20000
//! cargo run --release --example bench_client -- --url … --concurrency 1 --duration-s 3600 \
//!     --events 200 --tool-every 50 --progress 1000        # a soak: sequential, with progress
//! cargo run --release --example bench_client -- --url … --concurrency 10000 --streams 10000 \
//!     --http2-connections 100 --events 30 --pace-us 1000000 --tool-every 10 \
//!     --tool-stream-every 10 --ramp-ms 10000               # 10,000 at once over HTTP/2
//! ```

#[path = "bench_common/mod.rs"]
mod bench_common;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use bench_common::{Params, generate, monotonic_ns, process_cpu_ns};
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use memchr::memmem::{Finder, FinderRev};
use serde_json::json;
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The request body (the upstream ignores it; a real client sends one).
const REQUEST_BODY: &[u8] = br#"{"model":"bench","stream":true,"input":"go"}"#;
/// The request body of an AG-UI run (`--ag-ui`).
const RUN_BODY: &[u8] = br#"{"threadId":"bench","runId":"run","state":{},"messages":[{"id":"u","role":"user","content":"go"}],"tools":[],"context":[],"forwardedProps":{"model":"bench"}}"#;
/// Latencies above this (ns) are recorded as this.
const MAX_LATENCY_NS: u64 = 600_000_000_000;
/// HTTP/2 receive windows (`--http2-connections`): far more than a paced stream ever has in
/// flight, so flow control never holds an event back (the body is read as it arrives, which
/// hands the window back at once).
const H2_STREAM_WINDOW: u32 = 4 << 20;
const H2_CONNECTION_WINDOW: u32 = 64 << 20;

#[derive(Parser)]
#[command(about = "Load client for the toolpulse benchmark")]
struct Args {
    /// The Responses endpoint, e.g. http://127.0.0.1:8080/v1/responses (loopback).
    #[arg(long)]
    url: Uri,
    /// Streams open at once (one connection each). 1 = sequential.
    #[arg(long, default_value_t = 1)]
    concurrency: u64,
    /// Streams in all (default: one per lane, unless --duration-s is given).
    #[arg(long)]
    streams: Option<u64>,
    /// Start no new stream after this many seconds.
    #[arg(long)]
    duration_s: Option<f64>,
    /// Text-delta events per stream.
    #[arg(long, default_value_t = 100)]
    events: u64,
    /// One event per write every this many µs; 0 = as fast as the connection takes them.
    #[arg(long, default_value_t = 0)]
    pace_us: u64,
    /// A tool round before every N-th text delta (0 = none).
    #[arg(long, default_value_t = 0)]
    tool_every: u64,
    /// Only every K-th stream (index k % K == 0) has the tool rounds of --tool-every; the
    /// others none. 1 = all of them, 10 = one stream in ten.
    #[arg(long, default_value_t = 1)]
    tool_stream_every: u64,
    /// How long each tool "runs" at the upstream, µs.
    #[arg(long, default_value_t = 0)]
    tool_delay_us: u64,
    /// Seed of the first stream; stream k uses seed + k.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Check every body against the regenerated upstream input (no latency: events unstamped).
    #[arg(long)]
    verify: bool,
    /// Spread the lanes' first streams over this many ms.
    #[arg(long, default_value_t = 0)]
    ramp_ms: u64,
    /// Print progress to stderr every N finished streams (0 = never).
    #[arg(long, default_value_t = 0)]
    progress: u64,
    /// A stream that takes longer fails.
    #[arg(long, default_value_t = 300)]
    stream_timeout_s: u64,
    /// Open a new connection for every stream (a soak of connection churn) instead of keep-alive.
    #[arg(long)]
    fresh_connections: bool,
    /// `--url` is toolpulse's AG-UI endpoint: post runs, read AG-UI events.
    #[arg(long)]
    ag_ui: bool,
    /// Runtime worker threads; 1 runs a current-thread runtime.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Share this many HTTP/2 connections (h2c, prior knowledge) among the lanes, lane i on
    /// connection i % N; 0 = HTTP/1.1, a keep-alive connection per lane.
    #[arg(long, default_value_t = 0)]
    http2_connections: u64,
}

/// What the run is, shared by the lanes.
struct Run {
    args: Args,
    host: String,
    path: String,
    streams: u64,
    deadline: Option<Instant>,
    started: Instant,
    next: AtomicU64,
    finished: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    events: AtomicU64,
    upstream_events: AtomicU64,
    heartbeats: AtomicU64,
    seq_errors: AtomicU64,
    verified: AtomicU64,
    /// Streams started with tool rounds (`--tool-stream-every`).
    tool_streams: AtomicU64,
    /// Streams open now (response head received, body not ended) and the most at once; `full`
    /// streams (all the lanes) open at once: since when (while they are) and for how long in
    /// all, ns.
    open: AtomicU64,
    max_open: AtomicU64,
    full: u64,
    full_since_ns: AtomicU64,
    full_ns: AtomicU64,
    /// The shared HTTP/2 connections (`--http2-connections`; empty: HTTP/1.1) and how many
    /// were made (more than their number: some were made again).
    h2: Vec<tokio::sync::Mutex<Option<http2::SendRequest<Full<Bytes>>>>>,
    h2_connects: AtomicU64,
    first_error: Mutex<Option<String>>,
    latency_ns: Mutex<Histogram<u64>>,
}

impl Run {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A stream is open until the guard is dropped.
    fn opened(&self) -> OpenStream<'_> {
        let n = self.open.fetch_add(1, Relaxed) + 1;
        self.max_open.fetch_max(n, Relaxed);
        if n == self.full {
            self.full_since_ns.store(self.now_ns(), Relaxed);
        }
        OpenStream(self)
    }
}

struct OpenStream<'a>(&'a Run);

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        let run = self.0;
        if run.open.fetch_sub(1, Relaxed) == run.full {
            let since = run.full_since_ns.load(Relaxed);
            run.full_ns
                .fetch_add(run.now_ns().saturating_sub(since), Relaxed);
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let host = args
        .url
        .authority()
        .ok_or_else(|| anyhow::anyhow!("--url needs host:port"))?
        .to_string();
    anyhow::ensure!(
        args.url.scheme_str() == Some("http"),
        "--url must be http://"
    );
    anyhow::ensure!(
        ["127.", "localhost", "[::1]"]
            .iter()
            .any(|p| host.starts_with(p)),
        "--url must be a loopback address"
    );
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    anyhow::ensure!(
        args.tool_stream_every >= 1,
        "--tool-stream-every must be at least 1"
    );
    anyhow::ensure!(
        !(args.fresh_connections && args.http2_connections > 0),
        "--fresh-connections is for HTTP/1.1 only"
    );
    let streams = match (args.streams, args.duration_s) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => args.concurrency,
    };
    let started = Instant::now();
    let run = Arc::new(Run {
        host,
        path: args.url.path().to_string(),
        streams,
        deadline: args
            .duration_s
            .map(|s| started + Duration::from_secs_f64(s)),
        started,
        next: AtomicU64::new(0),
        finished: AtomicU64::new(0),
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        events: AtomicU64::new(0),
        upstream_events: AtomicU64::new(0),
        heartbeats: AtomicU64::new(0),
        seq_errors: AtomicU64::new(0),
        verified: AtomicU64::new(0),
        tool_streams: AtomicU64::new(0),
        open: AtomicU64::new(0),
        max_open: AtomicU64::new(0),
        full: args.concurrency.min(streams),
        full_since_ns: AtomicU64::new(0),
        full_ns: AtomicU64::new(0),
        h2: (0..args.http2_connections)
            .map(|_| tokio::sync::Mutex::new(None))
            .collect(),
        h2_connects: AtomicU64::new(0),
        first_error: Mutex::new(None),
        latency_ns: Mutex::new(Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)?),
        args,
    });
    let runtime = if run.args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(run.args.threads)
            .enable_all()
            .build()?
    };
    let cpu_before = process_cpu_ns();
    runtime.block_on(async {
        let lanes: Vec<_> = (0..run.args.concurrency)
            .map(|lane| tokio::spawn(run_lane(run.clone(), lane)))
            .collect();
        for lane in lanes {
            lane.await?;
        }
        anyhow::Ok(())
    })?;
    let wall = run.started.elapsed().as_secs_f64();
    let cpu = (process_cpu_ns() - cpu_before) as f64 / 1e9;
    let report = report(&run, wall, cpu);
    println!("{report}");
    if run.failed.load(Relaxed) > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn report(run: &Run, wall: f64, cpu: f64) -> serde_json::Value {
    let h = run.latency_ns.lock().expect("histogram lock");
    let us = |ns: u64| (ns as f64 / 100.0).round() / 10.0;
    let events = run.events.load(Relaxed);
    let upstream = run.upstream_events.load(Relaxed);
    json!({
        "url": run.args.url.to_string(),
        "protocol": if run.h2.is_empty() { "http/1.1" } else { "h2c" },
        "http2_connections": run.h2.len(),
        "http2_connects": run.h2_connects.load(Relaxed),
        "concurrency": run.args.concurrency,
        "events_per_stream": run.args.events,
        "pace_us": run.args.pace_us,
        "tool_every": run.args.tool_every,
        "tool_stream_every": run.args.tool_stream_every,
        "tool_streams": run.tool_streams.load(Relaxed),
        "max_open": run.max_open.load(Relaxed),
        "all_open_s": (run.full_ns.load(Relaxed) as f64 / 1e6).round() / 1e3,
        "streams_ok": run.ok.load(Relaxed),
        "streams_failed": run.failed.load(Relaxed),
        "events": events,
        "upstream_events": upstream,
        "injected_events": events.saturating_sub(upstream),
        "heartbeats": run.heartbeats.load(Relaxed),
        "seq_errors": run.seq_errors.load(Relaxed),
        "verified": run.verified.load(Relaxed),
        "wall_s": (wall * 1000.0).round() / 1000.0,
        "events_per_s": (upstream as f64 / wall).round(),
        "latency_count": h.len(),
        "latency_p50_us": us(h.value_at_quantile(0.50)),
        "latency_p99_us": us(h.value_at_quantile(0.99)),
        "latency_p999_us": us(h.value_at_quantile(0.999)),
        "latency_max_us": us(h.max()),
        "latency_mean_us": (h.mean() / 100.0).round() / 10.0,
        "client_cpu_s": (cpu * 1000.0).round() / 1000.0,
        "first_error": *run.first_error.lock().expect("error lock"),
    })
}

async fn run_lane(run: Arc<Run>, lane: u64) {
    let args = &run.args;
    if args.ramp_ms > 0 {
        let delay = args.ramp_ms * 1000 * lane / args.concurrency;
        tokio::time::sleep(Duration::from_micros(delay)).await;
    }
    let mut conn = None;
    loop {
        if run.deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let k = run.next.fetch_add(1, Relaxed);
        if k >= run.streams {
            break;
        }
        let tools = k.is_multiple_of(args.tool_stream_every);
        if tools && args.tool_every > 0 {
            run.tool_streams.fetch_add(1, Relaxed);
        }
        let params = Params {
            events: args.events,
            pace_us: args.pace_us,
            tool_every: if tools { args.tool_every } else { 0 },
            tool_delay_us: args.tool_delay_us,
            seed: args.seed.wrapping_add(k),
            ts: !args.verify,
        };
        let limit = Duration::from_secs(args.stream_timeout_s);
        let result = match tokio::time::timeout(limit, stream(&run, lane, &mut conn, &params)).await
        {
            Ok(result) => result,
            Err(_) => Err(format!("no end after {limit:?}")),
        };
        if args.fresh_connections {
            conn = None;
        }
        match result {
            Ok(()) => {
                run.ok.fetch_add(1, Relaxed);
            }
            Err(error) => {
                conn = None;
                run.failed.fetch_add(1, Relaxed);
                let mut first = run.first_error.lock().expect("error lock");
                first.get_or_insert_with(|| format!("stream seed {}: {error}", params.seed));
            }
        }
        let finished = run.finished.fetch_add(1, Relaxed) + 1;
        if args.progress > 0 && finished.is_multiple_of(args.progress) {
            eprintln!(
                "progress: {finished} streams ({} failed), {} events, {:.1} s",
                run.failed.load(Relaxed),
                run.events.load(Relaxed),
                run.started.elapsed().as_secs_f64()
            );
        }
    }
}

async fn connect(run: &Run) -> Result<SendRequest<Full<Bytes>>, String> {
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&run.host))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let (sender, connection) = http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        // Ends when the sender is dropped or the server closes; errors show on the request.
        let _ = connection.await;
    });
    Ok(sender)
}

/// Lane `lane`'s HTTP/2 connection (`lane % N`), made (again) if it is not open.
async fn h2_sender(run: &Run, lane: u64) -> Result<http2::SendRequest<Full<Bytes>>, String> {
    let slot = &run.h2[(lane % run.h2.len() as u64) as usize];
    // Held while connecting: the lanes of a connection wait for it rather than each make one.
    let mut slot = slot.lock().await;
    if let Some(sender) = slot.as_ref().filter(|s| !s.is_closed()) {
        return Ok(sender.clone());
    }
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&run.host))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let handshake = http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .handshake(TokioIo::new(tcp));
    let (sender, connection) = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| "HTTP/2 handshake timed out".to_string())?
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(async move {
        // Ends when every sender is dropped or the server closes; errors show on the streams.
        let _ = connection.await;
    });
    run.h2_connects.fetch_add(1, Relaxed);
    Ok(slot.insert(sender).clone())
}

/// Sends one request: on the lane's own HTTP/1.1 connection, or on its shared HTTP/2 one.
async fn send(
    run: &Run,
    lane: u64,
    conn: &mut Option<SendRequest<Full<Bytes>>>,
    params: &Params,
) -> Result<http::Response<Incoming>, String> {
    let h2 = !run.h2.is_empty();
    let request = match h2 {
        // HTTP/2 takes :scheme and :authority from the URI (hyper sends what the URI has).
        true => Request::post(format!("http://{}{}?{params}", run.host, run.path)),
        false => Request::post(format!("{}?{params}", run.path)).header(header::HOST, &run.host),
    };
    let request = request
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "text/event-stream")
        .body(Full::new(Bytes::from_static(match run.args.ag_ui {
            true => RUN_BODY,
            false => REQUEST_BODY,
        })))
        .map_err(|e| e.to_string())?;
    if h2 {
        let mut sender = h2_sender(run, lane).await?;
        return sender
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"));
    }
    let sender = match conn {
        Some(sender) if !sender.is_closed() => sender,
        _ => conn.insert(connect(run).await?),
    };
    sender
        .ready()
        .await
        .map_err(|e| format!("connection: {e}"))?;
    sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))
}

/// One request and its whole response body.
async fn stream(
    run: &Run,
    lane: u64,
    conn: &mut Option<SendRequest<Full<Bytes>>>,
    params: &Params,
) -> Result<(), String> {
    let response = send(run, lane, conn, params).await?;
    let status = response.status();
    let mut body = response.into_body();
    if status != StatusCode::OK {
        let text = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&text[..text.len().min(300)]).into_owned();
        return Err(format!("status {status}: {}", text.trim()));
    }
    let open = run.opened();
    let mut reader = Reader::new(params.ts && !run.args.ag_ui, run.args.verify);
    reader.ag_ui = run.args.ag_ui;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("body: {e}"))?;
        if let Ok(data) = frame.into_data() {
            let now = monotonic_ns();
            let mut latency = run.latency_ns.lock().expect("histogram lock");
            reader.push(&data, now, &mut latency);
        }
    }
    drop(open);
    run.events.fetch_add(reader.events, Relaxed);
    run.heartbeats.fetch_add(reader.heartbeats, Relaxed);
    if reader.seq_errors > 0 {
        run.seq_errors.fetch_add(reader.seq_errors, Relaxed);
    }
    let upstream = reader.finish(params)?;
    run.upstream_events.fetch_add(upstream, Relaxed);
    if run.args.verify && run.args.ag_ui {
        invariants::ag_ui::check(&reader.all).map_err(|e| format!("AG-UI run: {e}"))?;
        run.verified.fetch_add(1, Relaxed);
    } else if run.args.verify {
        let input = generate(params, None);
        invariants::check(&input, &reader.all, 1 << 20).map_err(|e| format!("invariants: {e}"))?;
        run.verified.fetch_add(1, Relaxed);
    }
    Ok(())
}

/// Splits a body into events and checks them as they arrive.
struct Reader {
    stamped: bool,
    /// The body is an AG-UI run (no numbers, no stamps).
    ag_ui: bool,
    keep: bool,
    /// The whole body, with `--verify`.
    all: Vec<u8>,
    /// An event not complete yet.
    pending: Vec<u8>,
    next_seq: u64,
    events: u64,
    /// Events with a `t_ns` stamp: the upstream's, never injected ones.
    stamped_events: u64,
    heartbeats: u64,
    seq_errors: u64,
    first_seq_error: Option<String>,
    last_was_completed: bool,
}

impl Reader {
    fn new(stamped: bool, keep: bool) -> Self {
        Reader {
            stamped,
            ag_ui: false,
            keep,
            all: Vec::new(),
            pending: Vec::new(),
            next_seq: 0,
            events: 0,
            stamped_events: 0,
            heartbeats: 0,
            seq_errors: 0,
            first_seq_error: None,
            last_was_completed: false,
        }
    }

    fn push(&mut self, data: &[u8], now: u64, latency: &mut Histogram<u64>) {
        if self.keep {
            self.all.extend_from_slice(data);
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.extend_from_slice(data);
        let mut start = 0;
        let mut from = 0;
        // An event ends at a blank line: "\n\n" (the upstream and toolpulse write LF only).
        while let Some(i) = memchr::memchr(b'\n', &pending[from..]) {
            let at = from + i;
            if pending.get(at + 1) == Some(&b'\n') {
                self.event(&pending[start..at], now, latency);
                start = at + 2;
                from = start;
            } else {
                from = at + 1;
            }
        }
        pending.drain(..start);
        self.pending = pending;
    }

    fn event(&mut self, event: &[u8], now: u64, latency: &mut Histogram<u64>) {
        if event.first() == Some(&b':') {
            self.heartbeats += 1;
            return;
        }
        // Both keys are near an end of the event: look there only.
        let head = &event[..event.len().min(HEAD_BYTES)];
        if self.ag_ui {
            self.events += 1;
            self.last_was_completed = RUN_FINISHED.find(head).is_some();
            return;
        }
        let Some(n) = number_after(head, Key::First(&SEQUENCE_NUMBER)) else {
            return;
        };
        if n != self.next_seq {
            self.seq_errors += 1;
            self.first_seq_error.get_or_insert_with(|| {
                format!("sequence_number {n} where {} was due", self.next_seq)
            });
        }
        self.next_seq = n + 1;
        self.events += 1;
        self.last_was_completed = COMPLETED.find(head).is_some();
        let tail = &event[event.len().saturating_sub(TAIL_BYTES)..];
        if self.stamped
            && let Some(t) = number_after(tail, Key::Last(&T_NS))
        {
            self.stamped_events += 1;
            latency.saturating_record(now.saturating_sub(t).max(1));
        }
    }

    /// Whole-stream checks; the number of upstream events.
    fn finish(&mut self, params: &Params) -> Result<u64, String> {
        if let Some(error) = self.first_seq_error.take() {
            return Err(error);
        }
        if !self.pending.is_empty() {
            return Err("the body ends inside an event".into());
        }
        if !self.last_was_completed {
            return Err(match self.ag_ui {
                true => "the last event is not RUN_FINISHED".into(),
                false => "the last numbered event is not response.completed".into(),
            });
        }
        let expected = params.event_count();
        if self.ag_ui {
            // The run's events are not the upstream's: what it sent is what it was asked for.
            return Ok(expected);
        }
        // Under profile `hosted` the gateway-run rounds arrive as hosted items instead.
        let short = if self.stamped {
            self.stamped_events != expected
        } else {
            self.events < expected
        };
        let shown = if short {
            expected - params.gateway_run_events()
        } else {
            expected
        };
        if self.stamped && self.stamped_events != shown {
            return Err(format!(
                "{} upstream events of {expected} arrived ({shown} expected under profile hosted)",
                self.stamped_events
            ));
        }
        if self.events < shown {
            return Err(format!(
                "{} events, fewer than the upstream's {shown}",
                self.events
            ));
        }
        Ok(expected)
    }
}

/// How far from the start of an event its type and `sequence_number` are looked for, and
/// from its end its `t_ns` (both generous for the script's and toolpulse's events).
const HEAD_BYTES: usize = 160;
const TAIL_BYTES: usize = 48;
static SEQUENCE_NUMBER: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"sequence_number\":"));
static RUN_FINISHED: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"type\":\"RUN_FINISHED\""));
static COMPLETED: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"type\":\"response.completed\""));
static T_NS: LazyLock<FinderRev<'static>> = LazyLock::new(|| FinderRev::new(b"\"t_ns\":"));

enum Key<'a> {
    First(&'a Finder<'static>),
    Last(&'a FinderRev<'static>),
}

/// The decimal number right after the first (or last) `key` in `event`.
fn number_after(event: &[u8], key: Key) -> Option<u64> {
    let at = match key {
        Key::First(finder) => finder.find(event)? + finder.needle().len(),
        Key::Last(finder) => finder.rfind(event)? + finder.needle().len(),
    };
    let digits = event[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 19 {
        return None;
    }
    std::str::from_utf8(&event[at..at + digits])
        .ok()?
        .parse()
        .ok()
}
