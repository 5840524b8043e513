//! Errors the proxy answers itself, before any upstream response header was sent: an
//! OpenAI-style JSON body, so SDKs surface a readable `APIError` instead of a parse failure.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::json;

use super::body::ProxyBody;
use crate::metrics::UpstreamCause;

/// Whose fault an error is, and how the client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyError {
    /// The upstream could not be connected to.
    Unreachable,
    /// The upstream did not send response headers within `header_timeout_ms`.
    HeaderTimeout,
    /// The upstream connection failed otherwise before headers (closed, reset, not HTTP).
    Upstream,
}

impl ProxyError {
    pub fn status(self) -> StatusCode {
        match self {
            ProxyError::HeaderTimeout => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::Unreachable | ProxyError::Upstream => StatusCode::BAD_GATEWAY,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            ProxyError::Unreachable => "upstream_unreachable",
            ProxyError::HeaderTimeout => "upstream_timeout",
            ProxyError::Upstream => "upstream_error",
        }
    }

    /// The cause label of `toolpulse_upstream_errors_total`.
    pub fn cause(self) -> UpstreamCause {
        match self {
            ProxyError::Unreachable => UpstreamCause::Unreachable,
            ProxyError::HeaderTimeout => UpstreamCause::HeaderTimeout,
            ProxyError::Upstream => UpstreamCause::Error,
        }
    }

    pub fn response(self, message: &str) -> Response<ProxyBody> {
        let body = json!({
            "error": {"message": message, "type": "proxy_error", "code": self.code()}
        });
        let mut response = Response::new(ProxyBody::full(Bytes::from(body.to_string())));
        *response.status_mut() = self.status();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// A request toolpulse itself refuses (a bad `x-toolpulse-profiles`), OpenAI-style.
pub fn invalid_request(code: &str, message: &str) -> Response<ProxyBody> {
    refused(StatusCode::BAD_REQUEST, code, message)
}

/// A 400 for a request body that is wrong in field `param`, OpenAI-style.
pub fn invalid_param(code: &str, message: &str, param: &str) -> Response<ProxyBody> {
    let body = json!({
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    });
    let mut response = Response::new(ProxyBody::full(Bytes::from(body.to_string())));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    let json = HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, json);
    response
}

/// A request toolpulse itself refuses with `status`, OpenAI-style; a 503 says when to retry.
pub fn refused(status: StatusCode, code: &str, message: &str) -> Response<ProxyBody> {
    let body = json!({
        "error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}
    });
    let mut response = Response::new(ProxyBody::full(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let json = HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, json);
    if status == StatusCode::SERVICE_UNAVAILABLE {
        let retry = HeaderValue::from_static("1");
        response.headers_mut().insert(header::RETRY_AFTER, retry);
    }
    response
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn openai_style_body() {
        let response = ProxyError::HeaderTimeout.response("no headers after 5s");
        assert_eq!(response.status(), 504);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("full body")
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["error"]["type"], "proxy_error");
        assert_eq!(v["error"]["code"], "upstream_timeout");
        assert_eq!(v["error"]["message"], "no headers after 5s");
    }
}
