//! A fast scripted Responses gateway for the load benchmark (`bench/run.sh`): HTTP/1.1 with
//! keep-alive, and HTTP/2 with prior knowledge (h2c: the `direct` target of phase `scale`) on the
//! same loopback address, told apart by the connection preface (hyper-util's `auto` server). `POST …/responses?events=…&pace_us=…&tool_every=…&
//! tool_delay_us=…&seed=…&ts=…` streams the event script of `bench_common` (see [`Params`]):
//! unpaced, ~16 KiB of events per write as fast as the socket takes them; paced, one event per
//! write every `pace_us`. Each event carries `"t_ns"`, CLOCK_MONOTONIC when it was written, so
//! the client measures latency from here to itself. `GET /healthz` answers `ok`.
//!
//! ```sh
//! cargo run --release --example bench_upstream -- --listen 127.0.0.1:9000
//! ```

#[path = "bench_common/mod.rs"]
mod bench_common;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bench_common::{Params, Script, Step, monotonic_ns};
use bytes::Bytes;
use clap::Parser;
use http::{Method, Request, Response, StatusCode, header};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::time::{Instant, Sleep};

/// Bytes of events per write when unpaced.
const BATCH_BYTES: usize = 16 * 1024;
/// Request bodies are read (and ignored) up to this size.
const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Concurrent streams an HTTP/2 client may open on one connection (hyper's default is 200).
const H2_MAX_STREAMS: u32 = 1000;

#[derive(Parser)]
#[command(about = "Scripted Responses gateway for the toolpulse load benchmark")]
struct Args {
    /// Address to listen on (loopback).
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// Runtime worker threads; 1 runs a current-thread runtime.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Exit after this many seconds whatever happens (a safety net for scripts).
    #[arg(long, default_value_t = 3600)]
    exit_after_s: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.listen.ip().is_loopback(),
        "--listen must be a loopback address"
    );
    let runtime = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()?
    };
    runtime.block_on(async {
        let listener = TcpListener::bind(args.listen).await?;
        println!("bench_upstream listening on {}", listener.local_addr()?);
        let limit = Duration::from_secs(args.exit_after_s);
        match tokio::time::timeout(limit, serve(listener)).await {
            Ok(result) => result,
            Err(_) => {
                eprintln!("bench_upstream: --exit-after-s reached, exiting");
                Ok(())
            }
        }
    })
}

async fn serve(listener: TcpListener) -> anyhow::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().keep_alive(true);
    builder.http2().max_concurrent_streams(H2_MAX_STREAMS);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                eprintln!("bench_upstream: accept: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        stream.set_nodelay(true)?;
        let builder = builder.clone();
        tokio::spawn(async move {
            let io = TokioIo::new(stream);
            // Errors here are clients going away mid-stream: nothing to do.
            let _ = builder.serve_connection(io, service_fn(handle)).await;
        });
    }
}

type Reply = Response<Either<EventBody, Full<Bytes>>>;

async fn handle(request: Request<Incoming>) -> Result<Reply, Infallible> {
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET && parts.uri.path() == "/healthz" {
        return Ok(text(StatusCode::OK, "ok\n".into()));
    }
    if parts.method != Method::POST || !parts.uri.path().ends_with("/responses") {
        return Ok(text(
            StatusCode::NOT_FOUND,
            "POST …/responses only\n".into(),
        ));
    }
    // Read the request body so the connection stays reusable.
    if Limited::new(body, MAX_REQUEST_BYTES)
        .collect()
        .await
        .is_err()
    {
        return Ok(text(StatusCode::BAD_REQUEST, "bad request body\n".into()));
    }
    let params = match Params::from_query(parts.uri.query().unwrap_or("")) {
        Ok(params) => params,
        Err(message) => return Ok(text(StatusCode::BAD_REQUEST, format!("{message}\n"))),
    };
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Either::Left(EventBody::new(&params)))
        .expect("static headers are valid");
    Ok(response)
}

fn text(status: StatusCode, body: String) -> Reply {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Either::Right(Full::new(Bytes::from(body))))
        .expect("static headers are valid")
}

/// The response body: events generated when hyper asks for the next frame, so a slow client
/// slows the script (backpressure) and nothing is buffered ahead.
struct EventBody {
    script: Script,
    /// Zero: unpaced.
    pace: Duration,
    sleep: Pin<Box<Sleep>>,
    sleeping: bool,
    done: bool,
}

impl EventBody {
    fn new(params: &Params) -> Self {
        EventBody {
            script: Script::new(params),
            pace: Duration::from_micros(params.pace_us),
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            sleeping: false,
            done: false,
        }
    }

    fn pause(&mut self, length: Duration) {
        if !length.is_zero() {
            self.sleep.as_mut().reset(Instant::now() + length);
            self.sleeping = true;
        }
    }
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let paced = !this.pace.is_zero();
        loop {
            if this.sleeping {
                ready!(this.sleep.as_mut().poll(cx));
                this.sleeping = false;
            }
            if this.done {
                return Poll::Ready(None);
            }
            let t_ns = Some(monotonic_ns());
            let mut buf = Vec::with_capacity(if paced { 512 } else { BATCH_BYTES + 1024 });
            loop {
                match this.script.next(&mut buf, t_ns) {
                    Step::Event if paced => {
                        this.pause(this.pace);
                        break;
                    }
                    Step::Event if buf.len() >= BATCH_BYTES => break,
                    Step::Event => {}
                    Step::Pause(us) => {
                        this.pause(Duration::from_micros(us));
                        if this.sleeping || paced {
                            break;
                        }
                    }
                    Step::End => {
                        this.done = true;
                        break;
                    }
                }
            }
            if !buf.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && !self.sleeping
    }
}
