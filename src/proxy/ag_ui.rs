//! The AG-UI endpoint (`[ag_ui]`): `POST <path>` with a `RunAgentInput`, answered with the
//! run's AG-UI event stream. The body is read whole (within the request-body budget) and
//! translated by the core into one streamed Responses request to the gateway (its
//! `Authorization` and other headers, and its query string, passed on as for any request); the
//! gateway's stream goes
//! through the core's AG-UI translator ([`super::ag_ui_body`]). An input that is not a valid
//! `RunAgentInput` is a 400 naming the field; once the input is valid, every failure (the
//! gateway unreachable, an error status, a broken stream) is the run's `RUN_ERROR`.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header, request::Parts};
use http_body::Frame;
use http_body_util::BodyExt;

use super::ag_ui_body::AgUiBody;
use super::body::ProxyBody;
use super::log::RequestLog;
use super::request_body::{MAX_READ_BODY_BYTES, PrepareError};
use super::{PROFILES_HEADER, Proxy, error};
use crate::config::{AgUiConfig, Config};
use crate::core::ag_ui::{Translator, input};
use crate::features::progress::Traceparent;
use crate::metrics;
use crate::net::listen::ClientBody;
use crate::net::upstream::{Outgoing, UpstreamBody, UpstreamError};
use crate::net::{budget, headers};

/// The gateway's path for a streamed response.
const RESPONSES_PATH: &str = "/v1/responses";
/// What is read of a gateway's error body for its message.
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

impl Proxy {
    /// Serves one AG-UI run (the request's path is `[ag_ui] path`).
    pub(super) async fn ag_ui(
        &self,
        (mut head, body): (Parts, ClientBody),
        peer: SocketAddr,
        budget: &budget::BodyBudget,
        ag_ui: &AgUiConfig,
        mut log: RequestLog,
    ) -> Response<ProxyBody> {
        let (config, settings) = self.current();
        if head.method != Method::POST {
            log.status = 405;
            log.response = metrics::Response::InvalidRequest;
            let message = format!("{} takes POST (an AG-UI RunAgentInput)", ag_ui.path);
            let mut response = error::refused(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                &message,
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return response.map(|body| body.with_log(log));
        }
        let timeout = config.clients.body_timeout;
        let read = match budget::read_up_to(body, MAX_READ_BODY_BYTES, budget, timeout).await {
            Ok(read) => read,
            Err(e) => return self.refuse_body(&PrepareError::Read(e), log),
        };
        let whole = budget::whole(&read.frames).filter(|_| read.rest.is_none());
        let run = match whole.map(|whole| input::translate(&whole, ag_ui.model.as_deref())) {
            Some(Ok(run)) => run,
            Some(Err(invalid)) => {
                log.status = 400;
                log.response = metrics::Response::InvalidRequest;
                let message = invalid.to_string();
                let response =
                    error::invalid_param("invalid_run_agent_input", &message, &invalid.field);
                return response.map(|body| body.with_log(log));
            }
            None => {
                log.status = 413;
                log.response = metrics::Response::InvalidRequest;
                let message =
                    format!("a RunAgentInput is read whole, up to {MAX_READ_BODY_BYTES} bytes");
                let response = error::refused(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "run_agent_input_too_large",
                    &message,
                );
                return response.map(|body| body.with_log(log));
            }
        };
        log.response = metrics::Response::AgUi;
        log.status = 200;
        let trace = Traceparent::check(&mut head.headers);
        log.span = self
            .telemetry
            .as_ref()
            .map(|t| t.request(&mut head, &config));
        let traced = log.span.as_ref().map(|span| span.trace_id()).or(trace.id());
        let trace_id = match traced {
            Some(id) => Some(id),
            None if self.progress.is_some() || trace == Traceparent::Removed => {
                Some(Traceparent::restart(&mut head.headers))
            }
            None => None,
        };
        let progress = self.progress.as_ref().zip(trace_id);
        let progress = progress.map(|(hub, trace_id)| hub.stream(Some(trace_id)));
        let mut translator = Translator::new(settings, run.thread_id, run.run_id)
            .with_client_tools(run.client_tools);
        let first = translator.start();
        let upstream = match self
            .send_run(head, peer, run.body, read.held, &config)
            .await
        {
            Ok(upstream) => Some(upstream),
            Err((message, code)) => {
                let failed = translator.fail(&message, Some(&code), Instant::now());
                let first = Bytes::from([first, failed].concat());
                // Every run's body reports a stream when it is dropped, an error run's too.
                self.metrics.streams_active.inc();
                let body =
                    AgUiBody::new(None, translator, first, self.end_streams.watch(), None, log);
                return stream_response(body);
            }
        };
        self.metrics.streams_active.inc();
        let body = AgUiBody::new(
            upstream,
            translator,
            first,
            self.end_streams.watch(),
            progress,
            log,
        );
        stream_response(body)
    }

    /// Sends the run's Responses request; its stream, or the run's error (message, code).
    async fn send_run(
        &self,
        mut head: Parts,
        peer: SocketAddr,
        body: Vec<u8>,
        held: budget::Held,
        config: &Config,
    ) -> Result<UpstreamBody, (String, String)> {
        // The query goes on as it is (e.g. an `api-version` the gateway wants).
        let query = head.uri.query().map(str::to_string);
        let uri = headers::upstream_uri(&self.upstream, RESPONSES_PATH, query.as_deref())
            .map_err(|e| (format!("bad upstream URI: {e}"), "proxy_error".to_string()))?;
        head.method = Method::POST;
        head.headers.remove(PROFILES_HEADER);
        for name in [
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::TRANSFER_ENCODING,
            header::CONTENT_ENCODING,
        ] {
            head.headers.remove(name);
        }
        let json = HeaderValue::from_static("application/json");
        head.headers.insert(header::CONTENT_TYPE, json);
        let accept = HeaderValue::from_static("text/event-stream");
        head.headers.insert(header::ACCEPT, accept);
        head.headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        headers::prepare_request(&mut head, uri, peer, config.proxy.preserve_host);
        let frames = [Frame::data(Bytes::from(body))].into();
        let outgoing = Outgoing::Read {
            frames,
            held,
            rest: None,
        };
        let timeout = config.proxy.header_timeout;
        let pending = Box::pin(self.client.request(Request::from_parts(head, outgoing)));
        let response = match tokio::time::timeout(timeout, pending).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                let cause = match e {
                    UpstreamError::Connect(_) => metrics::UpstreamCause::Unreachable,
                    _ => metrics::UpstreamCause::Error,
                };
                self.metrics.upstream_error(cause);
                let message = format!("the gateway request failed: {}", super::error_chain(&e));
                return Err((message, "upstream_error".into()));
            }
            Err(_) => {
                self.metrics
                    .upstream_error(metrics::UpstreamCause::HeaderTimeout);
                let ms = timeout.as_millis();
                let message = format!("the gateway sent no response headers within {ms} ms");
                return Err((message, "upstream_timeout".into()));
            }
        };
        let (head, body) = response.into_parts();
        if !head.status.is_success() {
            return Err(gateway_error(head.status, body).await);
        }
        if !headers::is_plain_event_stream(&head.headers) {
            let kind = head
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            let kind = kind.unwrap_or("no content type");
            let message = format!("the gateway answered {kind}, not an uncompressed event stream");
            return Err((message, "not_a_stream".into()));
        }
        Ok(body)
    }
}

/// The gateway's error status as the run's error: its body's `error.message` (OpenAI's shape),
/// else its text, and its `error.code`, else `http_<status>`.
async fn gateway_error(status: StatusCode, body: UpstreamBody) -> (String, String) {
    let limited = http_body_util::Limited::new(body, MAX_ERROR_BODY_BYTES);
    let bytes = match limited.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let json: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
    let error = json.as_ref().and_then(|j| j.get("error"));
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str());
    let code = error.and_then(|e| e.get("code")).and_then(|c| c.as_str());
    let text = String::from_utf8_lossy(&bytes);
    let message = match message {
        Some(message) => message.to_string(),
        None if !text.trim().is_empty() => text.trim().chars().take(1000).collect(),
        None => format!("the gateway answered {status}"),
    };
    let code = code.map_or_else(|| format!("http_{}", status.as_u16()), str::to_string);
    (message, code)
}

fn stream_response(body: AgUiBody) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::ag_ui(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers::prepare_rewritten_response(headers);
    response
}
