//! The demo gateway's MCP client: what a gateway does to run an MCP tool over Streamable HTTP
//! (initialize, `notifications/initialized`, `tools/call`, end the session), written out by
//! hand because the gateway is scripted anyway and the SDK's client would bring an HTTP stack
//! of its own into the binary. Like a traced gateway, it passes the request's `traceparent` on
//! in `params._meta`, which is how toolpulse knows exactly which stream a call belongs to.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::core::sse::{Item, Parser};

const PROTOCOL_VERSION: &str = "2025-06-18";
const SESSION: &str = "mcp-session-id";
/// The largest answer the client reads (the demo's are a few hundred bytes).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// A call that takes longer has gone wrong; the gateway then reports the tool as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A tool's result as the gateway puts it into `function_call_output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub text: String,
    pub is_error: bool,
}

#[derive(Clone)]
pub struct McpClient {
    http: Client<HttpConnector, Full<Bytes>>,
    url: String,
}

impl McpClient {
    /// A client of the MCP server at `url` (here: toolpulse's MCP front).
    pub fn new(url: String) -> McpClient {
        McpClient {
            http: Client::builder(TokioExecutor::new()).build_http(),
            url,
        }
    }

    /// Calls `tool` with `arguments` (a JSON object's text) in a session of its own. Errors
    /// become a failed result, as a gateway reports them to the model.
    pub async fn call(&self, tool: &str, arguments: &str, traceparent: Option<&str>) -> ToolResult {
        let call = self.call_in_session(tool, arguments, traceparent);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => failed(format!("search failed: {error:#}")),
            Err(_) => failed("search failed: the MCP server did not answer in time".into()),
        }
    }

    async fn call_in_session(
        &self,
        tool: &str,
        arguments: &str,
        traceparent: Option<&str>,
    ) -> anyhow::Result<ToolResult> {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "toolpulse-demo-gateway", "version": env!("CARGO_PKG_VERSION")}}});
        let response = self.post(None, &initialize).await?;
        let session = response
            .headers()
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        answer(response, 1).await.context("initialize")?;
        let session = session.as_deref();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(session, &initialized).await?;

        let arguments: Value = serde_json::from_str(arguments).context("tool arguments")?;
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(traceparent) = traceparent {
            params["_meta"] = json!({"traceparent": traceparent});
        }
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params});
        let response = self.post(session, &call).await?;
        let result = answer(response, 2).await.context("tools/call")?;
        if let Some(session) = session {
            let end = http::Request::delete(&self.url)
                .header(SESSION, session)
                .body(Full::default())?;
            let _ = self.http.request(end).await;
        }
        Ok(tool_result(&result))
    }

    async fn post(
        &self,
        session: Option<&str>,
        message: &Value,
    ) -> anyhow::Result<http::Response<Incoming>> {
        let mut request = http::Request::post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION);
        if let Some(session) = session {
            request = request.header(SESSION, session);
        }
        let request = request.body(Full::new(Bytes::from(message.to_string())))?;
        let response = self.http.request(request).await.context("MCP request")?;
        anyhow::ensure!(
            response.status().is_success(),
            "the MCP server answered {}",
            response.status()
        );
        Ok(response)
    }
}

fn failed(text: String) -> ToolResult {
    ToolResult {
        text,
        is_error: true,
    }
}

/// The JSON-RPC answer with id `id` in a JSON or an SSE response body.
async fn answer(response: http::Response<Incoming>, id: u64) -> anyhow::Result<Value> {
    let is_sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let mut body = Limited::new(response.into_body(), MAX_ANSWER_BYTES);
    let mut parser = Parser::new(MAX_ANSWER_BYTES);
    let mut json = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if !is_sse {
            json.extend_from_slice(&data);
            continue;
        }
        parser.push(&data);
        while let Some(item) = parser.next_item() {
            let Item::Event(event) = item else { continue };
            let Some(data) = event.data() else { continue };
            if let Some(message) = serde_json::from_slice::<Value>(&data)
                .ok()
                .filter(|m| m["id"] == id)
            {
                return outcome(message);
            }
        }
    }
    anyhow::ensure!(
        !is_sse,
        "the answer ended without a response to request {id}"
    );
    outcome(serde_json::from_slice(&json).context("a JSON-RPC answer")?)
}

fn outcome(message: Value) -> anyhow::Result<Value> {
    match message.get("result") {
        Some(result) => Ok(result.clone()),
        None => anyhow::bail!("{}", message["error"]["message"]),
    }
}

/// A `CallToolResult`'s text content, and whether the tool reported an error.
fn tool_result(result: &Value) -> ToolResult {
    let text: Vec<&str> = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect();
    ToolResult {
        text: text.join("\n"),
        is_error: result["isError"].as_bool().unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_results_text_and_error_flag() {
        let result = json!({"content": [{"type": "text", "text": "a"}, {"type": "image"},
                                        {"type": "text", "text": "b"}], "isError": true});
        assert_eq!(
            tool_result(&result),
            ToolResult {
                text: "a\nb".into(),
                is_error: true
            }
        );
        assert!(!tool_result(&json!({"content": []})).is_error);
    }
}
