//! A local OTLP/HTTP receiver for the load benchmark (`OTLP=1 bash bench/run.sh`): it takes
//! `POST /v1/traces`, decodes each body as an `ExportTraceServiceRequest` (so what toolpulse
//! sends is checked to be real OTLP, not just bytes) and counts the spans; `GET /count`
//! answers that count. HTTP/1.1 with keep-alive, one runtime thread, loopback only.
//!
//! ```sh
//! cargo run --release --example bench_collector -- --listen 127.0.0.1:4318
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use tokio::net::TcpListener;

/// An export request's body is read up to this size (toolpulse's batches are far smaller).
const MAX_REQUEST_BYTES: usize = 16 << 20;

#[derive(Parser)]
#[command(about = "Counting OTLP/HTTP traces receiver for the toolpulse load benchmark")]
struct Args {
    /// Address to listen on (loopback).
    #[arg(long, default_value = "127.0.0.1:4318")]
    listen: SocketAddr,
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(args.listen).await?;
        let spans = Arc::new(AtomicU64::new(0));
        let serving = async {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let spans = spans.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| answer(request, spans.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        };
        let limit = tokio::time::sleep(Duration::from_secs(args.exit_after_s));
        tokio::select! {
            () = serving => {}
            () = limit => {}
        }
        Ok(())
    })
}

async fn answer(
    request: Request<Incoming>,
    spans: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        Ok(response)
    };
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/count") => {
            reply(StatusCode::OK, spans.load(Ordering::Relaxed).to_string())
        }
        (&Method::POST, "/v1/traces") => {
            let body = Limited::new(request.into_body(), MAX_REQUEST_BYTES)
                .collect()
                .await;
            let Ok(body) = body else {
                return reply(StatusCode::PAYLOAD_TOO_LARGE, String::new());
            };
            match ExportTraceServiceRequest::decode(body.to_bytes()) {
                Ok(export) => {
                    let n: usize = export
                        .resource_spans
                        .iter()
                        .flat_map(|r| &r.scope_spans)
                        .map(|s| s.spans.len())
                        .sum();
                    spans.fetch_add(n as u64, Ordering::Relaxed);
                    reply(StatusCode::OK, String::new())
                }
                Err(error) => reply(StatusCode::BAD_REQUEST, error.to_string()),
            }
        }
        _ => reply(StatusCode::NOT_FOUND, String::new()),
    }
}
