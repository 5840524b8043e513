//! What the native items of both presentations share (a companion of profile `openai`, a
//! hosted item of profile `hosted`): their status, an MCP call's `server_label`, a file search's
//! queries, the text of a call that ended without output.

use serde_json::{Value, json};

use super::context::Context;
use crate::core::lifecycle::{Call, Outcome};

/// `server_label` of an MCP item whose `[[tools]]` rule names none.
pub const DEFAULT_SERVER_LABEL: &str = "gateway";

/// The error text of a call that ended without output.
pub const NO_OUTPUT: &str = "The stream ended before the tool's output arrived.";

/// The `server_label` of an MCP call's item: its `[[tools]]` rule's, else the default.
pub fn server_label<'a>(call: &Call, context: &'a Context<'_>) -> &'a str {
    context
        .templates(call)
        .and_then(|t| t.server_label.as_deref())
        .unwrap_or(DEFAULT_SERVER_LABEL)
}

/// The `status` of a native item (companion or hosted): in progress until the call's outcome.
pub fn item_status(outcome: Option<&Outcome>) -> &'static str {
    match outcome {
        None => "in_progress",
        Some(Outcome::Completed) => "completed",
        Some(Outcome::Failed(_)) => "failed",
    }
}

/// A file search's queries from its arguments: `queries` (strings), else `[query]`.
pub fn queries(args: &Value) -> Value {
    match (args.get("queries"), args.get("query")) {
        (Some(Value::Array(list)), _) if list.iter().all(Value::is_string) => {
            Value::Array(list.clone())
        }
        (_, Some(query @ Value::String(_))) => Value::Array(vec![query.clone()]),
        _ => json!([]),
    }
}
