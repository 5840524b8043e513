//! `POST /v1/progress`: progress from a tool that is not an MCP server.
//!
//! Body: `{"call_id"?, "tool"?, "arguments"?, "progress"?, "total"?, "message"?}` (at most
//! [`MAX_BODY_BYTES`]); `call_id` names the function_call, otherwise `tool` (its name as the
//! client stream shows it) and optionally `arguments` do. Answers: 202 delivered, 404 no open
//! call (or it has ended), 409 ambiguous, 400 a bad body (the error's `param` names the field),
//! 401 a missing or wrong `Authorization: Bearer` token when one is configured, 413 too large.
//! The token is checked first, so nothing else is told to a caller without it.

use crate::net::listen::ClientBody;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use serde_json::{Map, Value, json};

use super::body::McpBody;
use super::front::Front;
use super::log::McpLog;
use super::reply;
use crate::features::progress::{Delivery, Progress, Target};
use crate::metrics::{McpOutcome, ProgressSource};

pub const PATH: &str = "/v1/progress";
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A body field that is missing, of the wrong type, or unknown.
#[derive(Debug, PartialEq)]
pub struct BadField {
    pub field: String,
    pub message: String,
}

pub async fn answer(
    front: &Front,
    request: Request<ClientBody>,
    mut log: McpLog,
) -> Response<McpBody> {
    let (status, response) = respond(front, request).await;
    log.status = status.as_u16();
    log.outcome = match status.as_u16() {
        202 => McpOutcome::Delivered,
        401 => McpOutcome::Unauthorized,
        404 => McpOutcome::Unmatched,
        409 => McpOutcome::Ambiguous,
        _ => McpOutcome::Rejected,
    };
    response
}

async fn respond(front: &Front, request: Request<ClientBody>) -> (StatusCode, Response<McpBody>) {
    let fail = |status: StatusCode, code: &str, message: &str, param: Option<&str>| {
        (status, reply::error(status, code, message, param))
    };
    if let Some(token) = &front.progress_token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| bearer(v.as_bytes()));
        if !given.is_some_and(|given| token.matches(given)) {
            let (status, mut response) = fail(
                StatusCode::UNAUTHORIZED,
                "invalid_token",
                "Authorization: Bearer <[progress] token> is required",
                None,
            );
            let challenge = HeaderValue::from_static("Bearer");
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
            return (status, response);
        }
    }
    if request.method() != Method::POST {
        let (status, mut response) = fail(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "POST a progress report",
            None,
        );
        let allow = HeaderValue::from_static("POST");
        response.headers_mut().insert(header::ALLOW, allow);
        return (status, response);
    }
    let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            let message = format!("a progress report is at most {MAX_BODY_BYTES} bytes");
            return fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                &message,
                None,
            );
        }
        Err(error) => {
            let message = format!("could not read the body: {error}");
            return fail(StatusCode::BAD_REQUEST, "unreadable_body", &message, None);
        }
    };
    let (target, progress) = match read_report(&body) {
        Ok(report) => report,
        Err(bad) => {
            let field = Some(bad.field.as_str()).filter(|f| !f.is_empty());
            return fail(StatusCode::BAD_REQUEST, "invalid_body", &bad.message, field);
        }
    };
    let delivery = front.hub.post(target, progress).await;
    front
        .metrics
        .progress(ProgressSource::Http, delivery.into(), 1);
    match delivery {
        Delivery::Delivered | Delivery::Waiting => {
            let status = StatusCode::ACCEPTED;
            let body = json!({"status": "delivered"});
            (status, reply::json_response(status, &body))
        }
        Delivery::Unmatched => fail(
            StatusCode::NOT_FOUND,
            "no_open_call",
            "no open call in a client stream matches",
            None,
        ),
        Delivery::Late => fail(
            StatusCode::NOT_FOUND,
            "call_ended",
            "the call has already ended",
            None,
        ),
        Delivery::Ambiguous => fail(
            StatusCode::CONFLICT,
            "ambiguous_call",
            "open calls in more than one stream match: give call_id (or arguments)",
            None,
        ),
    }
}

/// The token of an `Authorization: Bearer <token>` value (the scheme is case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// Reads a report body: which call, and the progress.
pub fn read_report(body: &[u8]) -> Result<(Target, Progress), BadField> {
    let bad = |field: &str, message: String| BadField {
        field: field.to_string(),
        message,
    };
    let value: Value =
        serde_json::from_slice(body).map_err(|e| bad("", format!("the body is not JSON: {e}")))?;
    let Value::Object(mut fields) = value else {
        return Err(bad("", "the body must be a JSON object".into()));
    };
    const KNOWN: [&str; 6] = [
        "call_id",
        "tool",
        "arguments",
        "progress",
        "total",
        "message",
    ];
    if let Some(unknown) = fields.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        let message = format!("unknown field {unknown:?}; known: {}", KNOWN.join(", "));
        return Err(bad(unknown, message));
    }
    let call_id = string(&mut fields, "call_id")?;
    let tool = string(&mut fields, "tool")?;
    let arguments = fields.remove("arguments");
    let target = match (call_id, tool) {
        (Some(call_id), _) => Target::CallId(call_id),
        (None, Some(name)) => Target::Tool { name, arguments },
        (None, None) => return Err(bad("call_id", "call_id or tool is required".into())),
    };
    let progress = Progress {
        // A report with only a message has made no countable progress.
        progress: number(&mut fields, "progress")?.unwrap_or(0.0),
        total: number(&mut fields, "total")?,
        message: string(&mut fields, "message")?,
    };
    Ok((target, progress))
}

fn string(fields: &mut Map<String, Value>, name: &str) -> Result<Option<String>, BadField> {
    match fields.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() || name == "message" => Ok(Some(s)),
        Some(_) => Err(BadField {
            field: name.to_string(),
            message: format!("{name} must be a non-empty string"),
        }),
    }
}

fn number(fields: &mut Map<String, Value>, name: &str) -> Result<Option<f64>, BadField> {
    match fields.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(BadField {
            field: name.to_string(),
            message: format!("{name} must be a number"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports() {
        let (target, progress) =
            read_report(br#"{"call_id":"call_1","progress":2,"total":5,"message":"a\r\nb"}"#)
                .expect("valid");
        assert_eq!(target, Target::CallId("call_1".into()));
        assert_eq!(progress.progress, 2.0);
        assert_eq!(progress.total, Some(5.0));
        assert_eq!(progress.message.as_deref(), Some("a\r\nb"));
        let (target, progress) =
            read_report(br#"{"tool":"search","arguments":{"q":"x"},"message":"half"}"#)
                .expect("valid");
        assert_eq!(
            target,
            Target::Tool {
                name: "search".into(),
                arguments: Some(json!({"q": "x"}))
            }
        );
        assert_eq!((progress.progress, progress.total), (0.0, None));
    }

    #[test]
    fn bad_bodies_name_the_field() {
        for (body, field) in [
            (&br#"{"progress":1}"#[..], "call_id"),
            (br#"{"call_id":1}"#, "call_id"),
            (br#"{"call_id":""}"#, "call_id"),
            (br#"{"tool":"t","progress":"1"}"#, "progress"),
            (br#"{"tool":"t","total":[]}"#, "total"),
            (br#"{"tool":"t","message":7}"#, "message"),
            (br#"{"tool":"t","callId":"x"}"#, "callId"),
            (b"[]", ""),
            (b"{", ""),
        ] {
            let bad = read_report(body).expect_err("invalid");
            assert_eq!(bad.field, field, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn bearer_values() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bear"), None);
    }
}
