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
pub mod front;
pub mod jsonrpc;
pub mod log;
pub mod reply;
pub mod server;
pub mod token;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::net::listen::ClientBody;
use http::{Request, Response, StatusCode};

use crate::metrics::McpOutcome;
use crate::net::budget::BodyBudget;
use body::McpBody;
use calls::Share;
pub use front::Front;
use log::McpLog;

/// The header that carries `[progress] token` on the MCP paths when `[mcp] require_token` is
/// set (the gateway's `Authorization` belongs to the MCP server). Removed before forwarding.
pub const TOKEN_HEADER: &str = "x-toolpulse-token";

impl Front {
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
