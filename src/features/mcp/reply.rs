//! Answers the MCP listener writes itself, OpenAI-style like the proxy's:
//! `{"error":{"message","type","code","param"}}`.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::json;

use super::body::McpBody;

/// An error answer; `param` names the offending field of a request body.
pub fn error(
    status: StatusCode,
    code: &str,
    message: &str,
    param: Option<&str>,
) -> Response<McpBody> {
    let kind = if status.is_server_error() {
        "proxy_error"
    } else {
        "invalid_request_error"
    };
    let body = json!({
        "error": {"message": message, "type": kind, "code": code, "param": param}
    });
    json_response(status, &body)
}

pub fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<McpBody> {
    let mut response = Response::new(McpBody::full(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let json = HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, json);
    response
}
