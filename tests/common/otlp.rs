//! A real OTLP/HTTP receiver for the tracing tests: a hyper server on a loopback port that
//! decodes each `POST /v1/traces` body as an `ExportTraceServiceRequest` (protobuf, with the
//! official `opentelemetry-proto` types) and hands every span on, with its resource's
//! `service.name`. It answers 200 unless told to fail.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::sync::mpsc;

/// One exported span and the service that sent it.
#[derive(Debug, Clone)]
pub struct Received {
    pub service: Option<String>,
    pub span: Span,
}

pub struct Collector {
    pub addr: SocketAddr,
    spans: mpsc::UnboundedReceiver<Received>,
    status: Arc<AtomicU16>,
}

impl Collector {
    pub async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (sender, spans) = mpsc::unbounded_channel();
        let status = Arc::new(AtomicU16::new(200));
        let answer = status.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (sender, answer) = (sender.clone(), answer.clone());
                let service = service_fn(move |request| {
                    let (sender, answer) = (sender.clone(), answer.clone());
                    async move { receive(request, &sender, &answer).await }
                });
                tokio::spawn(async move {
                    let io = TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Collector {
            addr,
            spans,
            status,
        }
    }

    /// The base endpoint (toolpulse appends `/v1/traces`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers every later export with `status`.
    pub fn answer_with(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
    }

    /// Waits (10 s at most) until `n` spans have arrived; returns them.
    pub async fn spans(&mut self, n: usize) -> Vec<Received> {
        let mut out = Vec::new();
        let wait = async {
            while out.len() < n {
                out.push(self.spans.recv().await.expect("collector runs"));
            }
        };
        if tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .is_err()
        {
            panic!("{n} spans expected, {} arrived: {out:#?}", out.len());
        }
        out
    }

    /// Spans that arrived without waiting.
    pub fn arrived(&mut self) -> Vec<Received> {
        std::iter::from_fn(|| self.spans.try_recv().ok()).collect()
    }
}

async fn receive(
    request: http::Request<Incoming>,
    sender: &mpsc::UnboundedSender<Received>,
    status: &AtomicU16,
) -> Result<http::Response<Full<Bytes>>, hyper::Error> {
    let path_ok = request.uri().path() == "/v1/traces";
    let protobuf = request
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "application/x-protobuf");
    let body = request.into_body().collect().await?.to_bytes();
    let status = status.load(Ordering::Relaxed);
    let reply = |code: u16| {
        let mut response = http::Response::new(Full::new(Bytes::new()));
        *response.status_mut() = http::StatusCode::from_u16(code).expect("status");
        Ok(response)
    };
    if !path_ok || !protobuf {
        return reply(404);
    }
    if status != 200 {
        return reply(status);
    }
    let Ok(export) = ExportTraceServiceRequest::decode(body) else {
        return reply(400);
    };
    for resource_spans in export.resource_spans {
        let attributes = resource_spans.resource.map(|r| r.attributes);
        let service = attributes
            .as_deref()
            .and_then(|a| string(a, "service.name"));
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                let service = service.clone();
                let _ = sender.send(Received { service, span });
            }
        }
    }
    reply(200)
}

/// The string value of attribute `key`.
pub fn string(attributes: &[KeyValue], key: &str) -> Option<String> {
    match value(attributes, key)? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// The integer value of attribute `key`.
pub fn int(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match value(attributes, key)? {
        any_value::Value::IntValue(n) => Some(*n),
        _ => None,
    }
}

pub fn value<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    let kv = attributes.iter().find(|kv| kv.key == key)?;
    kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref())
}

/// Lowercase hex of an id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
