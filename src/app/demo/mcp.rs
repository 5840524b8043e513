//! The demo's MCP server: a stand-in for a GitHub MCP server, built on the official Rust MCP
//! SDK (`rmcp`) and served over Streamable HTTP on a loopback port. The demo gateway reaches it
//! only through toolpulse's MCP front, as a real gateway configured for toolpulse would.
//!
//! - `search_issues` is the slow tool: it works in four steps and reports each one with
//!   `notifications/progress` ("step 2/4: …") when the call carries a progress token — which
//!   the front adds, so the progress reaches the user's stream and never the gateway.
//! - `create_issue` fails the way antwort reports a tool's refusal ("invalid arguments: …").

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// What `search_issues` reports at the start of each of its steps.
pub const SEARCH_STEPS: [&str; 4] = [
    "reading the open issues",
    "matching \u{201c}streaming\u{201d}",
    "ranking 3 matches",
    "writing the summary",
];
/// How long `create_issue` takes to refuse.
const CREATE_MS: u64 = 1000;

/// The server's tools; `step` is how long each of `search_issues`'s steps takes.
#[derive(Clone)]
struct Github {
    step: Duration,
}

impl Github {
    async fn search_issues(
        &self,
        arguments: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let repo = text_argument(arguments, "repo");
        let token = context.meta.get_progress_token();
        let total = SEARCH_STEPS.len();
        for (k, what) in SEARCH_STEPS.iter().enumerate() {
            if let Some(token) = &token {
                let step = ProgressNotificationParam::new(token.clone(), k as f64 + 1.0)
                    .with_total(total as f64)
                    .with_message(format!("step {}/{total}: {what}", k + 1));
                // A client that went away no longer wants progress; the work goes on.
                let _ = context.peer.notify_progress(step).await;
            }
            tokio::time::sleep(self.step).await;
        }
        let text = format!(
            "3 open issues mention streaming: #12 buffering behind nginx, #31 idle timeouts, \
             #48 reconnects (in {repo})"
        );
        CallToolResult::success(vec![ContentBlock::text(text)])
    }

    async fn create_issue(&self, arguments: &JsonObject) -> CallToolResult {
        tokio::time::sleep(Duration::from_millis(CREATE_MS)).await;
        let repo = text_argument(arguments, "repo");
        let text = format!("invalid arguments: repository {repo} not found");
        CallToolResult::error(vec![ContentBlock::text(text)])
    }
}

fn text_argument(arguments: &JsonObject, name: &str) -> String {
    let value = arguments.get(name).and_then(Value::as_str).unwrap_or("?");
    value.chars().take(100).collect()
}

fn schema(required: &[&str]) -> Arc<JsonObject> {
    let properties: serde_json::Map<String, Value> = required
        .iter()
        .map(|name| (name.to_string(), json!({"type": "string"})))
        .collect();
    let schema = json!({"type": "object", "properties": properties, "required": required});
    match schema {
        Value::Object(object) => Arc::new(object),
        _ => Arc::default(),
    }
}

impl ServerHandler for Github {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "search_issues",
                "Search a repository's open issues (slow; reports its progress)",
                schema(&["repo", "q"]),
            ),
            Tool::new(
                "create_issue",
                "File an issue in a repository",
                schema(&["repo", "title"]),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        let result = match request.name.as_ref() {
            "search_issues" => self.search_issues(&arguments, &context).await,
            "create_issue" => self.create_issue(&arguments).await,
            other => {
                let message = format!("no tool named {other:?}");
                return Err(ErrorData::invalid_params(message, None));
            }
        };
        Ok(result.into())
    }
}

/// Serves the MCP server at `http://<addr>/mcp` (any path, in fact) until the runtime stops.
pub async fn serve(listener: TcpListener, step: Duration) {
    // No SSE keep-alive comments: the demo's calls are short and the front forwards them as is.
    let config = StreamableHttpServerConfig::default().with_sse_keep_alive(None);
    let service: StreamableHttpService<Github, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(Github { step }), Arc::default(), config);
    while let Ok((stream, _)) = listener.accept().await {
        let service = service.clone();
        tokio::spawn(async move {
            let answer = service_fn(move |request| {
                let service = service.clone();
                async move { Ok::<_, Infallible>(service.handle(request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), answer)
                .await;
        });
    }
}

/// Binds a loopback port for [`serve`].
pub async fn bind() -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}
