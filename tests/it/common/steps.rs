//! A real MCP server (the official Rust SDK, `rmcp`, over Streamable HTTP on a loopback port):
//! tool `steps` reports "step k/n" (after its `label` argument, if any), `delay_ms` apart
//! (default 0), when the call carries a progress token, and answers "did n steps". Stateful
//! (sessions) or stateless (no `Mcp-Session-Id`, each POST on its own).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

#[derive(Clone)]
pub struct Steps;

impl ServerHandler for Steps {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arg = |name: &str| {
            let value = request.arguments.as_ref().and_then(|a| a.get(name));
            value.and_then(Value::as_u64).unwrap_or(0)
        };
        let (n, delay) = (arg("n").max(1), Duration::from_millis(arg("delay_ms")));
        let label = request.arguments.as_ref().and_then(|a| a.get("label"));
        let label = label.and_then(Value::as_str).unwrap_or("").to_string();
        if let Some(token) = context.meta.get_progress_token() {
            for k in 1..=n {
                tokio::time::sleep(delay).await;
                let step = ProgressNotificationParam::new(token.clone(), k as f64)
                    .with_total(n as f64)
                    .with_message(format!("{label}step {k}/{n}"));
                let _ = context.peer.notify_progress(step).await;
            }
        }
        let text = format!("did {n} steps");
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

pub async fn start_mcp_server() -> SocketAddr {
    serve(StreamableHttpServerConfig::default().with_sse_keep_alive(None)).await
}

/// A stateless server: no sessions, so a gateway's progress tokens are unique per request at
/// best (the official SDKs use the JSON-RPC id).
#[allow(dead_code)] // not every test binary that has `common` uses it
pub async fn start_stateless_mcp_server() -> SocketAddr {
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(None)
        .with_legacy_session_mode(false);
    serve(config).await
}

async fn serve(config: StreamableHttpServerConfig) -> SocketAddr {
    let service: StreamableHttpService<Steps, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(Steps), Arc::default(), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service.clone();
            tokio::spawn(async move {
                let answer = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    async move { Ok::<_, std::convert::Infallible>(service.handle(request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), answer)
                    .await;
            });
        }
    });
    addr
}
