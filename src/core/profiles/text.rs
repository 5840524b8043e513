//! What the payload-carrying profiles derive from a call, shared by them: display and summary
//! templates, result counts, failure messages, retry flags, timestamps. Templates never panic:
//! a placeholder without a value leaves the display out (or the default summary in).

use std::time::SystemTime;

use serde_json::Value;

use super::context::Context;
use crate::core::lifecycle::{Call, Failure, Progress, ToolOutput};
use crate::core::sse::NewEvent;

/// The call's arguments as a sanitized JSON value (a string when they are not JSON).
pub fn arguments(context: &Context<'_>, call: &Call) -> Value {
    context.settings.sanitizer.text(&call.arguments)
}

/// Adds a progress report's `progress`, `total` and `message` (the last two when present).
pub fn with_progress(event: NewEvent, report: &Progress) -> NewEvent {
    event
        .with("progress", number(report.progress))
        .maybe("total", report.total.map(number))
        .maybe("message", report.message.clone())
}

/// A whole number as an integer (`2`, not `2.0`, as tools write them).
fn number(x: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: integers up to here are exact
    if x.fract() == 0.0 && x.abs() < EXACT {
        Value::from(x as i64)
    } else {
        Value::from(x)
    }
}

/// The tool's output, parsed when it is JSON (unsanitized: for counting and flags only).
pub fn output_json(output: Option<&ToolOutput>) -> Value {
    output
        .and_then(|o| serde_json::from_str(&o.text).ok())
        .unwrap_or(Value::Null)
}

/// Fills `{name}` placeholders; `None` when one has no value.
pub fn fill(template: &str, value_of: impl Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}');
        let name = close.map(|c| &after[..c]);
        match name {
            Some(name) if is_placeholder(name) => {
                out.push_str(&value_of(name)?);
                rest = &after[name.len() + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

fn is_placeholder(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// A top-level field of the (sanitized) arguments, as text.
fn argument(args: &Value, name: &str) -> Option<String> {
    match args.get(name)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// The per-tool display string, with argument placeholders.
pub fn display(context: &Context<'_>, call: &Call, args: &Value) -> Option<String> {
    let template = context.templates(call)?.display.as_deref()?;
    fill(template, |name| argument(args, name))
}

/// The result count: at the per-tool `count` pointer (an array's length, or a number), else
/// the length of a top-level array.
pub fn result_count(context: &Context<'_>, call: &Call, output: &Value) -> Option<u64> {
    let pointer = context.templates(call).and_then(|t| t.count.as_deref());
    let at = match pointer {
        Some(pointer) => output.pointer(pointer)?,
        None => output,
    };
    match at {
        Value::Array(items) => Some(items.len() as u64),
        Value::Number(n) if pointer.is_some() => n.as_u64(),
        _ => None,
    }
}

/// The per-tool summary, else "web_search returned 8 results" / "web_search completed".
pub fn summary(context: &Context<'_>, call: &Call, args: &Value, count: Option<u64>) -> String {
    let template = context.templates(call).and_then(|t| t.summary.as_deref());
    let filled = template.and_then(|t| {
        fill(t, |name| match name {
            "count" => count.map(|c| c.to_string()),
            "tool" => Some(call.name.clone()),
            _ => argument(args, name),
        })
    });
    filled.unwrap_or_else(|| match count {
        Some(1) => format!("{} returned 1 result", call.name),
        Some(n) => format!("{} returned {n} results", call.name),
        None => format!("{} completed", call.name),
    })
}

/// A human-readable message for a failure.
pub fn failure_message(
    context: &Context<'_>,
    failure: &Failure,
    output: Option<&ToolOutput>,
) -> String {
    let sanitizer = &context.settings.sanitizer;
    let text = output
        .map(|o| o.text.as_str())
        .filter(|t| !t.trim().is_empty());
    match failure {
        Failure::Error => {
            let error = output.and_then(|o| o.error.as_deref()).unwrap_or("{}");
            let parsed: Value = serde_json::from_str(error).unwrap_or(Value::Null);
            match parsed.get("message").and_then(Value::as_str) {
                Some(message) => sanitizer.message(message.to_string()),
                None => sanitizer.text_as_string(error),
            }
        }
        Failure::Status(status) => match text {
            Some(text) => sanitizer.text_as_string(text),
            None => format!("the tool ended with status {status}"),
        },
        Failure::Pattern(_) => sanitizer.text_as_string(text.unwrap_or_default()),
        Failure::NoOutput => "the stream ended before the tool returned a result".into(),
    }
}

/// `retryable` and `wasRetried` (or `was_retried`) from the output JSON, else false.
pub fn retry_flags(output: &Value) -> (bool, bool) {
    let flag = |keys: &[&str]| {
        keys.iter()
            .any(|k| output.get(k).and_then(Value::as_bool) == Some(true))
    };
    (flag(&["retryable"]), flag(&["wasRetried", "was_retried"]))
}

/// RFC 3339 UTC with milliseconds: "2025-12-20T12:34:56.123Z".
pub fn timestamp(wall: Option<SystemTime>) -> Option<String> {
    wall.map(|t| humantime::format_rfc3339_millis(t).to_string())
}

/// Whether an output is worth sending: not blank, and not JSON `null`, `[]`, `{}` or `""`
/// however it is spaced.
pub fn has_content(output: Option<&ToolOutput>) -> bool {
    let Some(text) = output.map(|o| o.text.trim()).filter(|t| !t.is_empty()) else {
        return false;
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Null) => false,
        Ok(Value::Array(items)) => !items.is_empty(),
        Ok(Value::Object(fields)) => !fields.is_empty(),
        Ok(Value::String(s)) => !s.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_or_give_up() {
        let args = serde_json::json!({"query": "rust sse", "n": 3});
        let value_of = |name: &str| argument(&args, name);
        assert_eq!(
            fill("Searching for “{query}”…", value_of).as_deref(),
            Some("Searching for “rust sse”…")
        );
        assert_eq!(
            fill("{n} of {query}", value_of).as_deref(),
            Some("3 of rust sse")
        );
        assert_eq!(fill("missing {nope}", value_of), None);
        assert_eq!(
            fill("braces { } {a b} {", value_of).as_deref(),
            Some("braces { } {a b} {")
        );
        assert_eq!(fill("{ünï}", value_of).as_deref(), Some("{ünï}"));
    }

    #[test]
    fn flags_and_content() {
        assert_eq!(
            retry_flags(&serde_json::json!({"retryable": true, "was_retried": true})),
            (true, true)
        );
        assert_eq!(retry_flags(&serde_json::json!("x")), (false, false));
        let out = |t: &str| ToolOutput {
            text: t.into(),
            error: None,
        };
        assert!(!has_content(Some(&out(" [] "))));
        assert!(!has_content(Some(&out("[ ]"))));
        assert!(!has_content(Some(&out("{ \n }"))));
        assert!(has_content(Some(&out("[1]"))));
        assert!(!has_content(None));
    }

    #[test]
    fn error_messages_are_not_requoted() {
        let settings = crate::config::Config::default().settings();
        let context = Context {
            settings: &settings,
            wall: None,
            hosted: false,
            nonce: 0,
        };
        let output = ToolOutput {
            text: String::new(),
            error: Some(r#"{"message":"boom: it crashed"}"#.into()),
        };
        let message = failure_message(&context, &Failure::Error, Some(&output));
        assert_eq!(message, "boom: it crashed");
    }

    #[test]
    fn timestamps_are_rfc3339_millis() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_766_234_096_123);
        assert_eq!(
            timestamp(Some(t)).as_deref(),
            Some("2025-12-20T12:34:56.123Z")
        );
    }
}
