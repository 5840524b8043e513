//! The MCP front: a second listener that stands in front of the gateway's MCP servers
//! (Streamable HTTP), so that their `notifications/progress` can reach the client stream that
//! shows the call, and never the model.
//!
//! - `/<name>` forwards to the `[[mcp.servers]]` entry of that name ([`forward`]); `tools/call`
//!   requests are followed ([`calls`]), those without a progress token get one of toolpulse's
//!   ([`token`]), and the answers' progress goes to the [`ProgressHub`] ([`answer`]).
//! - `POST /v1/progress` takes progress from tools that are not MCP servers ([`endpoint`]).
//! - Every other path is answered 404: the front forwards only to configured servers.
//!
//! The hub decides which stream a report belongs to; the front never does.

pub mod answer;
pub mod body;
pub mod calls;
pub mod endpoint;
pub mod forward;
pub mod jsonrpc;
pub mod log;
pub mod reply;
pub mod server;
pub mod token;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::net::listen::ClientBody;
use http::{Request, Response, StatusCode};
use tokio_util::sync::CancellationToken;

use crate::config::{BearerToken, ClientLimits, Config, McpConfig};
use crate::features::progress::ProgressHub;
use crate::features::telemetry::Telemetry;
use crate::metrics::{McpOutcome, Metrics};
use crate::net::budget::{BodyBudget, Listener};
use crate::net::client;
use body::McpBody;
use calls::{Calls, Registry, Share};
use log::McpLog;

/// The header that carries `[progress] token` on the MCP paths when `[mcp] require_token` is
/// set (the gateway's `Authorization` belongs to the MCP server). Removed before forwarding.
pub const TOKEN_HEADER: &str = "x-toolpulse-token";

/// Shared state of the MCP listener.
pub struct Front {
    config: McpConfig,
    clients: ClientLimits,
    /// Request bodies read whole, held at once (the proxy's, when they run together).
    body_budget: BodyBudget,
    progress_token: Option<BearerToken>,
    client: client::Upstream,
    header_timeout: Duration,
    hub: Arc<dyn ProgressHub>,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    /// Cancelled when toolpulse stops accepting: GET streams end.
    stop_streams: CancellationToken,
    /// Cancelled when the drain time has run out: every answer ends.
    end_streams: CancellationToken,
    /// Client spans for traced requests, when `[telemetry]` names a collector.
    telemetry: Option<Arc<Telemetry>>,
}

impl Front {
    /// The front of `config`'s `[mcp]` section; `None` when its listener does not run. The
    /// upstream client follows `[proxy]` (connect and header timeouts, `upstream_ca`).
    pub fn new(
        config: &Config,
        hub: Arc<dyn ProgressHub>,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Option<Front>> {
        let Some(mcp) = &config.mcp else {
            return Ok(None);
        };
        Ok(Some(Front {
            config: mcp.clone(),
            clients: config.clients.clone(),
            body_budget: BodyBudget::new(&config.clients),
            progress_token: config.progress.token.clone(),
            client: client::build(&config.proxy)?,
            header_timeout: config.proxy.header_timeout,
            hub,
            registry: Arc::default(),
            metrics,
            stop_streams: CancellationToken::new(),
            end_streams: CancellationToken::new(),
            telemetry: None,
        }))
    }

    /// Holds the bodies it reads within `budget` (the proxy's: one budget per process).
    pub fn with_body_budget(mut self, budget: BodyBudget) -> Self {
        self.body_budget = budget;
        self
    }

    /// Traces forwarded requests the gateway traced, as client spans.
    pub fn with_telemetry(mut self, telemetry: Arc<Telemetry>) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    pub fn listen(&self) -> SocketAddr {
        self.config.listen
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    fn calls(&self, server: &str, session: Option<String>, share: &Arc<Share>) -> Calls {
        let (hub, registry) = (self.hub.clone(), self.registry.clone());
        Calls::new(
            hub,
            registry,
            share.clone(),
            self.metrics.clone(),
            server.to_string(),
            session,
        )
    }

    /// The budget as one connection from `peer` draws on it.
    pub fn connection_budget(&self, peer: SocketAddr) -> BodyBudget {
        self.body_budget.connection(Listener::Mcp, peer.ip())
    }

    /// Answers one request on the MCP listener; `share` is its connection's share of the calls
    /// followed, `budget` its connection's budget of bodies ([`Front::connection_budget`]).
    pub async fn handle(
        &self,
        mut request: Request<ClientBody>,
        peer: SocketAddr,
        share: &Arc<Share>,
        budget: &BodyBudget,
    ) -> Response<McpBody> {
        let path = request.uri().path().to_string();
        let mut log = McpLog::new(self.metrics.clone(), request.method().clone(), &path);
        if let Some(problem) =
            crate::net::listen::host_problem(request.version(), request.headers())
        {
            log.status = 400;
            log.outcome = McpOutcome::InvalidHost;
            return reply::error(StatusCode::BAD_REQUEST, "invalid_host", problem, None);
        }
        if path == endpoint::PATH {
            return endpoint::answer(self, request, log).await;
        }
        // Toolpulse's own: never the server's.
        let given = request.headers_mut().remove(TOKEN_HEADER);
        if self.config.require_token
            && !given.is_some_and(|g| {
                self.progress_token
                    .as_ref()
                    .is_some_and(|t| t.matches(g.as_bytes()))
            })
        {
            log.status = 401;
            log.outcome = McpOutcome::InvalidToken;
            let message =
                format!("{TOKEN_HEADER}: <[progress] token> is required ([mcp] require_token)");
            return reply::error(StatusCode::UNAUTHORIZED, "invalid_token", &message, None);
        }
        let name = path.strip_prefix('/').unwrap_or(&path);
        match self.config.server(name) {
            Some(server) => {
                let client = forward::Client {
                    peer,
                    share,
                    budget,
                };
                forward::forward(self, server, request, &client, log).await
            }
            None => not_found(&path, log),
        }
    }
}

fn not_found(path: &str, mut log: McpLog) -> Response<McpBody> {
    log.status = 404;
    log.outcome = McpOutcome::NotFound;
    let message = format!(
        "no MCP server is configured at {}: use /<[[mcp.servers]] name> or POST {}",
        path.chars().take(64).collect::<String>(),
        endpoint::PATH
    );
    reply::error(StatusCode::NOT_FOUND, "unknown_server", &message, None)
}
