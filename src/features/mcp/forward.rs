//! Forwarding one request to a configured MCP server: the Streamable HTTP transport passed on
//! as it is (any method, the body streamed, every end-to-end header, the answer's status and
//! headers), with two exceptions. A POST body is read (up to [`MAX_CALL_BODY_BYTES`]) so that
//! its `tools/call` requests can be followed and given toolpulse's progress token; and an
//! uncompressed SSE answer is read event by event ([`super::answer`]). Requests ask for
//! uncompressed answers (`Accept-Encoding: identity`) so their events can be read.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::net::listen::ClientBody;
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri, header};
use http_body::Frame;

use super::answer::Answer;
use super::body::McpBody;
use super::calls::{Calls, MAX_CALLS_PER_REQUEST, Share};
use super::front::Front;
use super::jsonrpc;
use super::log::McpLog;
use super::reply;
use crate::config::McpServer;
use crate::features::progress::{TraceId, Traceparent};
use crate::features::telemetry::mcp::McpRequest;
use crate::metrics::{Listener, McpOutcome, Unfollowed};
use crate::net::budget::{self, BodyBudget, Paced, ReadError};
use crate::net::headers;
use crate::net::upstream::Outgoing;

/// The largest POST body read to find `tools/call` requests; a larger one is forwarded as it
/// is, and its calls are not followed.
pub const MAX_CALL_BODY_BYTES: usize = 4 << 20;

/// Who sent a request: its address, and its connection's share of the calls followed and
/// budget of bodies.
pub struct Client<'a> {
    pub peer: SocketAddr,
    pub share: &'a Arc<Share>,
    pub budget: &'a BodyBudget,
}

pub async fn forward(
    front: &Front,
    server: &McpServer,
    request: Request<ClientBody>,
    client: &Client<'_>,
    mut log: McpLog,
) -> Response<McpBody> {
    let (peer, share) = (client.peer, client.share);
    log.server = Some(server.name.clone());
    let (mut head, body) = request.into_parts();
    // As the proxy listener: an invalid `traceparent` is not carried on (restarted below).
    let trace = Traceparent::check(&mut head.headers);
    let header_trace = trace.id();
    let session = head
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok());
    let session = session.map(str::to_string);
    let mut calls = front.calls(&server.name, session, share);
    let mut first_call = None;
    let body = if head.method == Method::POST && may_be_json(&head) {
        let read = read_calls(
            front,
            client.budget,
            server,
            &mut head,
            body,
            &mut calls,
            header_trace,
        );
        match read.await {
            Ok((body, rpc, first)) => {
                log.rpc = rpc;
                first_call = first;
                body
            }
            Err(error) => return refuse_body(front, &error, log),
        }
    } else {
        Outgoing::Streamed(Paced::new(body, front.clients.body_timeout))
    };
    let fault = body.fault();
    log.calls = calls.len();
    if let Some(telemetry) = &front.telemetry {
        let request = McpRequest {
            server: &server.name,
            upstream: &server.upstream,
            rpc: &log.rpc,
            tool: first_call.as_ref().map(|(t, p)| (t.as_str(), p.as_deref())),
        };
        log.span = telemetry.mcp_request(&mut head, &request);
    }
    if trace == Traceparent::Removed && !head.headers.contains_key("traceparent") {
        Traceparent::restart(&mut head.headers);
    }

    let uri = upstream_uri(&server.upstream, head.uri.query());
    headers::prepare_request(&mut head, uri, peer, false);
    let identity = HeaderValue::from_static("identity");
    head.headers.insert(header::ACCEPT_ENCODING, identity);
    let is_get = head.method == Method::GET;
    let pending = front.client.request(Request::from_parts(head, body));
    let response = match tokio::time::timeout(front.header_timeout, pending).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            if let Some(failure) = fault.take() {
                // The gateway's own body failed on its way: its error, not the server's.
                return refuse_body(front, &failure, log);
            }
            let (outcome, code) = if error.is_connect() {
                (McpOutcome::Unreachable, "upstream_unreachable")
            } else {
                (McpOutcome::UpstreamError, "upstream_error")
            };
            log.outcome = outcome;
            log.status = 502;
            // The address tried, and the whole chain (hyper-util says only "client error").
            let (upstream, chain) = (&server.upstream, crate::net::upstream::error_chain(&error));
            let message = format!("MCP server {} at {upstream} failed: {chain}", server.name);
            tracing::warn!(server = %server.name, %upstream, error = %chain, "MCP server request failed");
            return reply::error(StatusCode::BAD_GATEWAY, code, &message, None);
        }
        Err(_) => {
            log.outcome = McpOutcome::Timeout;
            log.status = 504;
            let message = format!(
                "MCP server {} sent no response headers within {} ms",
                server.name,
                front.header_timeout.as_millis()
            );
            return reply::error(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_timeout",
                &message,
                None,
            );
        }
    };
    log.status = response.status().as_u16();
    let (mut head, body) = response.into_parts();
    headers::remove_hop_by_hop(&mut head.headers);
    let answer = headers::is_plain_event_stream(&head.headers).then(Answer::default);
    if answer.is_some() {
        // Consumed events change its length.
        head.headers.remove(header::CONTENT_LENGTH);
    }
    // A GET stream only waits for server messages: it ends as soon as toolpulse stops (the
    // gateway resumes it elsewhere); answers to calls get the drain time.
    let ending = match is_get {
        true => front.stop_streams.clone().cancelled_owned(),
        false => front.end_streams.clone().cancelled_owned(),
    };
    Response::from_parts(head, McpBody::forwarded(body, answer, calls, ending, log))
}

/// The answer to a POST body that is not forwarded, or to a streamed body that failed on the
/// gateway's side: 400 (unreadable), 408 (too slow), 503 (over the body budget or a share).
fn refuse_body(front: &Front, error: &ReadError, mut log: McpLog) -> Response<McpBody> {
    let (status, code, outcome) = match error {
        ReadError::Client(_) => (
            StatusCode::BAD_REQUEST,
            "unreadable_body",
            McpOutcome::ClientGone,
        ),
        ReadError::Timeout(_) => (
            StatusCode::REQUEST_TIMEOUT,
            "request_body_timeout",
            McpOutcome::BodyTimeout,
        ),
        ReadError::OverBudget | ReadError::OverPeerShare | ReadError::OverConnectionShare => (
            StatusCode::SERVICE_UNAVAILABLE,
            "request_bodies_over_budget",
            McpOutcome::OverBudget,
        ),
    };
    front
        .metrics
        .request_body_refused(Listener::Mcp, error.reason());
    log.status = status.as_u16();
    log.outcome = outcome;
    reply::error(status, code, &error.to_string(), None)
}

/// Whether a body may be JSON: labelled so, or not labelled, or labelled as `curl -d` does by
/// default (`application/x-www-form-urlencoded`, which people sending JSON leave by accident).
/// Any other type (multipart uploads, octet streams) is streamed, never read.
fn may_be_json(head: &Parts) -> bool {
    let Some(value) = head.headers.get(header::CONTENT_TYPE) else {
        return true;
    };
    let value = String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase();
    let media = value.split(';').next().unwrap_or("").trim();
    media.ends_with("json")
        || media.ends_with("+json")
        || media == "application/x-www-form-urlencoded"
}

/// The first `tools/call` of a body: its tool and `params._meta.traceparent` (for its span).
type FirstCall = Option<(String, Option<String>)>;

/// Reads a POST body; binds its `tools/call` requests and adds toolpulse's token to those
/// without one. Returns the body to forward, the JSON-RPC methods (for the log) and the first
/// call.
async fn read_calls(
    front: &Front,
    bodies: &BodyBudget,
    server: &McpServer,
    head: &mut Parts,
    body: ClientBody,
    calls: &mut Calls,
    header_trace: Option<TraceId>,
) -> Result<(Outgoing, Vec<String>, FirstCall), ReadError> {
    let timeout = front.clients.body_timeout;
    let mut read = budget::read_up_to(body, MAX_CALL_BODY_BYTES, bodies, timeout).await?;
    let whole = match read.rest {
        None => budget::whole(&read.frames),
        Some(_) => None,
    };
    let Some(whole) = whole else {
        return Ok((Outgoing::read(read), Vec::new(), None));
    };
    let (registry_room, share_room) = (front.registry.room(), calls.share_room());
    let max_calls = MAX_CALLS_PER_REQUEST.min(registry_room).min(share_room);
    let prepared = jsonrpc::prepare(&whole, max_calls, super::token::new);
    if prepared.skipped > 0 {
        let cause = if share_room < MAX_CALLS_PER_REQUEST.min(registry_room) {
            Unfollowed::ConnectionShare
        } else if registry_room < MAX_CALLS_PER_REQUEST {
            Unfollowed::RegistryFull
        } else {
            Unfollowed::RequestShare
        };
        let metrics = &front.metrics;
        metrics.mcp_unfollowed(cause, prepared.skipped as u64);
    }
    let first = prepared
        .calls
        .first()
        .map(|call| (call.tool.clone(), call.traceparent.clone()));
    for call in prepared.calls {
        let function_name = server.function_name(&call.tool);
        calls.bind(call, function_name, header_trace);
    }
    if let Some(changed) = prepared.body {
        let length = HeaderValue::from(changed.len());
        head.headers.insert(header::CONTENT_LENGTH, length);
        read.frames = VecDeque::from([Frame::data(Bytes::from(changed))]);
    }
    Ok((Outgoing::read(read), prepared.methods, first))
}

/// The server's endpoint with the request's query, if any.
fn upstream_uri(upstream: &Uri, query: Option<&str>) -> Uri {
    let path = upstream.path();
    let path_and_query = match query {
        Some(query) => format!("{path}?{query}"),
        None => path.to_string(),
    };
    let mut parts = upstream.clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok().or(parts.path_and_query);
    Uri::from_parts(parts).expect("a validated upstream with a valid path and query")
}
