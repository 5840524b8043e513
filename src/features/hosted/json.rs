//! Profile `hosted` for a non-streaming response (`stream` false or absent): the same
//! presentation in the Response object's `output` (docs/hosted.md). Each `function_call` of a
//! gateway-run tool with its `function_call_output` becomes one hosted item in its final
//! state, at the call's place; the pairs go to the next-turn store. Sans-IO: bytes in, bytes and
//! pairs out.

use std::borrow::Cow;
use std::time::Instant;

use serde_json::Value;

use super::store::Pair;
use crate::core::lifecycle::{Call, Failure, Outcome, OutputFacts, ToolOutput};
use crate::core::profiles::{Context, hosted};
use crate::core::settings::Settings;

/// A response presented: its new body, and the pairs behind its hosted items (by item id).
#[derive(Debug, Default)]
pub struct Presented {
    pub body: Vec<u8>,
    pub pairs: Vec<(String, Pair)>,
}

/// `body` (a Response object) with its gateway-run calls shown as hosted items; `None` when it
/// has none, or is not a Response object with an `output` list (it then goes on as it is).
pub fn present(
    body: &[u8],
    settings: &Settings,
    client_functions: &[String],
    nonce: u64,
    now: Instant,
) -> Option<Presented> {
    let mut response: Value = serde_json::from_slice(body).ok()?;
    let output = response.get_mut("output")?.as_array_mut()?;
    // The calls the gateway ran that are shown as hosted items.
    let hosted_calls: Vec<String> = output
        .iter()
        .filter(|item| item["type"] == "function_call")
        .filter_map(|item| Some((item["call_id"].as_str()?, item["name"].as_str()?)))
        .filter(|(call_id, name)| {
            hosted::hosts(settings.classifier.classify_rule(name).0)
                && !client_functions.iter().any(|f| f == name)
                && call_id.len() <= crate::core::ids::MAX_CALL_ID_BYTES
        })
        .map(|(call_id, _)| call_id.to_string())
        .collect();
    if hosted_calls.is_empty() {
        return None;
    }
    let context = Context {
        settings,
        wall: None,
        hosted: true,
        nonce,
    };
    let items = std::mem::take(output);
    let mut pairs = Vec::new();
    let mut shown = Vec::with_capacity(items.len());
    for item in &items {
        let call_id = item["call_id"].as_str().unwrap_or_default();
        let hosted = hosted_calls.iter().any(|c| c == call_id);
        if !hosted || (item["type"] != "function_call" && item["type"] != "function_call_output") {
            shown.push(item.clone());
            continue;
        }
        if item["type"] == "function_call_output" {
            continue;
        }
        let output = items
            .iter()
            .find(|o| o["type"] == "function_call_output" && o["call_id"] == call_id);
        let (hosted_item, id) = hosted_item(item, output, &context, now);
        if let Some(output) = output {
            let pair = Pair {
                call_item: item.to_string(),
                output_item: output.to_string(),
            };
            pairs.push((id, pair));
        }
        shown.push(hosted_item);
    }
    *output = shown;
    let body = serde_json::to_vec(&response).ok()?;
    Some(Presented { body, pairs })
}

/// The final hosted item of a `function_call` and its output (if any), and its id.
fn hosted_item(
    call: &Value,
    output: Option<&Value>,
    context: &Context<'_>,
    now: Instant,
) -> (Value, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let name = text(&call["name"]);
    let (kind, rule) = context.settings.classifier.classify_rule(&name);
    let call = Call {
        call_id: text(&call["call_id"]),
        item_id: text(&call["id"]),
        output_index: None,
        companion: None,
        hosted_id: None,
        name,
        kind,
        rule,
        arguments: text(&call["arguments"]),
        arguments_truncated: false,
        added_at: now,
        running_since: Some(now),
    };
    let (outcome, tool_output) = match output {
        None => (Outcome::Failed(Failure::NoOutput), None),
        Some(output) => {
            let texts: Vec<Cow<'_, str>> = match &output["output"] {
                Value::String(s) => vec![Cow::Borrowed(s.as_str())],
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(Cow::Borrowed))
                    .collect(),
                _ => Vec::new(),
            };
            let error = match &output["error"] {
                Value::Null => None,
                e => Some(Cow::Owned(e.to_string())),
            };
            let facts = OutputFacts {
                status: output["status"].as_str().map(Cow::Borrowed),
                error,
                texts,
            };
            let outcome = context.settings.failure.judge(&facts);
            let tool_output = ToolOutput {
                text: facts.texts.join("\n"),
                error: facts.error.map(Cow::into_owned),
            };
            (outcome, Some(tool_output))
        }
    };
    let id = hosted::item_id(&call, context).into_owned();
    let item = hosted::item(&call, context, &id, Some((&outcome, tool_output.as_ref())));
    // Strings, `null`s and `Value`s in an object: nothing that fails to become a `Value`.
    let item = serde_json::to_value(item).expect("a hosted item is a JSON object");
    (item, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn config() -> Config {
        Config::from_toml_str(
            "[[tools]]\nmatch = [\"github_*\"]\nkind = \"mcp\"\n[failure]\noutput_patterns = [\"^no executor\"]\n",
        )
        .expect("config")
    }

    #[test]
    fn pairs_become_hosted_items_in_place() {
        let body = br#"{"id":"resp_1","object":"response","output":[
            {"type":"function_call","id":"fc_1","call_id":"c1","name":"web_search","arguments":"{\"query\":\"q\"}","status":"completed"},
            {"type":"function_call","id":"fc_2","call_id":"c2","name":"github_broken","arguments":"{}","status":"completed"},
            {"type":"function_call","id":"fc_3","call_id":"c3","name":"lookup","arguments":"{}","status":"completed"},
            {"type":"function_call_output","id":"o2","call_id":"c2","output":"no executor found"},
            {"type":"function_call_output","id":"o1","call_id":"c1","output":"[1,2]"},
            {"type":"message","id":"msg_1","role":"assistant","content":[]}
        ],"usage":{"total_tokens":3}}"#;
        let presented =
            present(body, &config().settings(), &[], 9, Instant::now()).expect("changed");
        let v: Value = serde_json::from_slice(&presented.body).expect("JSON");
        let types: Vec<_> = v["output"]
            .as_array()
            .expect("list")
            .iter()
            .map(|i| i["type"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            types,
            ["web_search_call", "mcp_call", "function_call", "message"]
        );
        assert_eq!(v["output"][0]["status"], "completed");
        assert_eq!(v["output"][0]["action"]["query"], "q");
        assert_eq!(v["output"][1]["status"], "failed");
        assert_eq!(
            v["output"][1]["error"]["content"][0]["text"],
            "no executor found"
        );
        assert_eq!(v["usage"]["total_tokens"], 3, "the rest as it was");
        assert_eq!(presented.pairs.len(), 2);
        let (id, pair) = &presented.pairs[0];
        assert_eq!(id, v["output"][0]["id"].as_str().expect("id"));
        assert!(pair.output_item.contains("[1,2]"));
    }

    #[test]
    fn declared_functions_and_plain_responses_are_left_alone() {
        let body = br#"{"output":[{"type":"function_call","call_id":"c1","name":"web_search","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"x"}]}"#;
        let now = Instant::now();
        assert!(present(body, &config().settings(), &["web_search".into()], 0, now).is_none());
        let plain = br#"{"output":[{"type":"message"}]}"#;
        assert!(present(plain, &config().settings(), &[], 0, now).is_none());
        assert!(present(b"not json", &config().settings(), &[], 0, now).is_none());
    }
}
