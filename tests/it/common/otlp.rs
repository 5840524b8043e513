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
        if tokio::time::timeout(Duration::from_secs(60), wait)
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

/// The spans of one trace as a tree, roughly as a tracing backend lists them: each span with its
/// kind, start offset, length, status and attributes (for the README and failing tests).
pub fn render(spans: &[Received]) -> String {
    use std::fmt::Write;
    let Some(start) = spans.iter().map(|r| r.span.start_time_unix_nano).min() else {
        return String::new();
    };
    let ids: Vec<&[u8]> = spans.iter().map(|r| r.span.span_id.as_slice()).collect();
    let mut out = String::new();
    let mut roots: Vec<&Received> = spans
        .iter()
        .filter(|r| !ids.contains(&r.span.parent_span_id.as_slice()))
        .collect();
    roots.sort_by_key(|r| r.span.start_time_unix_nano);
    for root in roots {
        let service = root.service.as_deref().unwrap_or("?");
        let _ = writeln!(out, "trace {} ({service})", hex(&root.span.trace_id));
        line(&mut out, root, start, "");
        let mut children: Vec<&Received> = spans
            .iter()
            .filter(|r| r.span.parent_span_id == root.span.span_id)
            .collect();
        children.sort_by_key(|r| r.span.start_time_unix_nano);
        let last = children.len();
        for (i, child) in children.into_iter().enumerate() {
            line(
                &mut out,
                child,
                start,
                if i + 1 == last { "└─ " } else { "├─ " },
            );
        }
    }
    out
}

fn line(out: &mut String, received: &Received, start: u64, branch: &str) {
    use std::fmt::Write;
    let span = &received.span;
    let kind = match span.kind {
        2 => "server",
        3 => "client",
        _ => "internal",
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    let status = match &span.status {
        Some(s) if s.code == 2 => format!("ERROR {}", s.message),
        Some(s) if s.code == 1 => "OK".to_string(),
        _ => "unset".to_string(),
    };
    let _ = writeln!(
        out,
        "{branch}{}  [{kind}]  +{:.0} ms, {:.0} ms, status {status}",
        span.name,
        ms(span.start_time_unix_nano - start),
        ms(span.end_time_unix_nano - span.start_time_unix_nano),
    );
    let indent = if branch.is_empty() { "    " } else { "       " };
    for kv in &span.attributes {
        let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => format!("{s:?}"),
            Some(any_value::Value::IntValue(n)) => n.to_string(),
            Some(any_value::Value::DoubleValue(n)) => n.to_string(),
            Some(any_value::Value::BoolValue(b)) => b.to_string(),
            other => format!("{other:?}"),
        };
        let _ = writeln!(out, "{indent}{} = {value}", kv.key);
    }
}
