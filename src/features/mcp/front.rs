//! The MCP front's shared state: its config, the upstream client, the hub progress goes to,
//! the registry of calls followed, the body budget and the signals that end its streams. What
//! a request gets is decided by the handler (the module above) and its parts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::calls::{Calls, Registry, Share};
use crate::config::{BearerToken, ClientLimits, Config, McpConfig};
use crate::features::progress::ProgressHub;
use crate::features::telemetry::Telemetry;
use crate::metrics::Metrics;
use crate::net::budget::{BodyBudget, Listener};
use crate::net::client;

/// Shared state of the MCP listener.
pub struct Front {
    pub(super) config: McpConfig,
    pub(super) clients: ClientLimits,
    /// Request bodies read whole, held at once (the proxy's, when they run together).
    pub(super) body_budget: BodyBudget,
    pub(super) progress_token: Option<BearerToken>,
    pub(super) client: client::HyperClient,
    pub(super) header_timeout: Duration,
    pub(super) hub: Arc<dyn ProgressHub>,
    pub(super) registry: Arc<Registry>,
    pub(super) metrics: Arc<Metrics>,
    /// Cancelled when toolpulse stops accepting: GET streams end.
    pub(super) stop_streams: CancellationToken,
    /// Cancelled when the drain time has run out: every answer ends.
    pub(super) end_streams: CancellationToken,
    /// Client spans for traced requests, when `[telemetry]` names a collector.
    pub(super) telemetry: Option<Arc<Telemetry>>,
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

    pub(super) fn calls(&self, server: &str, session: Option<String>, share: &Arc<Share>) -> Calls {
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
}
