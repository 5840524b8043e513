//! The reverse proxy: hyper glue around the sans-IO [`Rewriter`].
//!
//! Every request, any method and path, goes to the upstream with its body streamed. Responses
//! that are uncompressed `text/event-stream` are rewritten as they arrive; everything else
//! passes through byte for byte (minus hop-by-hop headers). Errors before response headers
//! become OpenAI-style JSON errors (502/504); after headers, the body ends cleanly once open tool
//! calls are closed.

pub mod body;
pub mod client;
pub mod error;
pub mod headers;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response, Uri};
use hyper::body::Incoming;

use crate::config::Config;
use crate::rewrite::Rewriter;
use body::ProxyBody;
use error::ProxyError;

/// Shared state of one proxy: its config and the upstream client.
pub struct Proxy {
    config: Arc<Config>,
    upstream: Uri,
    client: client::Upstream,
}

impl Proxy {
    /// Builds the proxy; the config must name an upstream.
    pub fn new(config: Arc<Config>) -> anyhow::Result<Self> {
        let upstream = config.proxy.upstream.clone().ok_or_else(|| {
            anyhow::anyhow!("no upstream: set [proxy] upstream or pass --upstream URL")
        })?;
        let client = client::build(&config.proxy)?;
        Ok(Proxy {
            config,
            upstream,
            client,
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Forwards one request and returns the (possibly rewritten) response.
    pub async fn handle(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> Response<ProxyBody> {
        let (mut head, body) = request.into_parts();
        let path = head.uri.path().to_string();
        let resume = headers::resumption(&head.method, &path, head.uri.query());
        let query = match &resume {
            Some((_, rest)) => Some(rest.as_str()).filter(|q| !q.is_empty()),
            None => head.uri.query(),
        };
        let uri = match headers::upstream_uri(&self.upstream, &path, query) {
            Ok(uri) => uri,
            Err(e) => {
                return ProxyError::Upstream.response(&format!("cannot build upstream URI: {e}"));
            }
        };
        headers::prepare_request(&mut head, uri, peer, self.config.proxy.preserve_host);
        let request = Request::from_parts(head, body);

        let timeout = self.config.proxy.header_timeout;
        let response = match tokio::time::timeout(timeout, self.client.request(request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                let kind = if e.is_connect() {
                    ProxyError::Unreachable
                } else {
                    ProxyError::Upstream
                };
                tracing::warn!(error = %error_chain(&e), code = kind.code(), "upstream request failed");
                return kind.response(&format!("upstream request failed: {}", error_chain(&e)));
            }
            Err(_) => {
                tracing::warn!(?timeout, "upstream sent no response headers in time");
                let message = format!(
                    "upstream sent no response headers within {} ms",
                    timeout.as_millis()
                );
                return ProxyError::HeaderTimeout.response(&message);
            }
        };

        let (mut head, body) = response.into_parts();
        headers::remove_hop_by_hop(&mut head.headers);
        if !headers::is_plain_event_stream(&head.headers) {
            if headers::is_event_stream(&head.headers) {
                tracing::warn!(
                    "compressed event stream from upstream: forwarded without tool events"
                );
            }
            return Response::from_parts(head, ProxyBody::Passthrough(body));
        }
        headers::prepare_rewritten_response(&mut head.headers);
        let mut rewriter = Rewriter::new(self.config.clone());
        if let Some((n, _)) = resume {
            rewriter = rewriter.resume_after(n);
        }
        Response::from_parts(head, ProxyBody::rewritten(body, rewriter))
    }
}

/// An error with its sources, on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
