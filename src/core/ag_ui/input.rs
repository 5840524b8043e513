//! An AG-UI `RunAgentInput` as one streamed Responses request.
//!
//! - `model`: `forwardedProps.model`, else the configured default;
//! - `context` (if any): one developer message first, a line `<description>: <value>` per entry;
//! - `messages` into `input`, in order: user, system and developer messages as messages; an
//!   assistant message's text as an assistant message, then each of its `toolCalls` as a
//!   `function_call` (`call_id` = the tool call's id); a `tool` message as a
//!   `function_call_output` (`call_id` = `toolCallId`, `output` = its content as it is);
//!   activity and reasoning messages are not sent;
//! - `tools` as function tools (`strict: false`: a frontend's schema need not be a strict one);
//! - `stream: true`. `state` and the rest of `forwardedProps` are not sent.
//!
//! A body that is not a valid `RunAgentInput` is refused naming the field.

use serde_json::{Map, Value, json};

/// A run's input, translated.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub thread_id: String,
    pub run_id: String,
    /// The names of the tools the input declares: their calls are the client's.
    pub client_tools: Vec<String>,
    /// The Responses request body (JSON).
    pub body: Vec<u8>,
}

/// What is wrong with a body: the field (a JSON path such as `messages[2].toolCallId`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid RunAgentInput: {}: {}", self.field, self.message)
    }
}

fn invalid(field: impl Into<String>, message: &str) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Translates the body of a run; `default_model` is `[ag_ui] model`.
pub fn translate(body: &[u8], default_model: Option<&str>) -> Result<Run, Invalid> {
    let value: Value = serde_json::from_slice(body).map_err(|_| invalid("body", "is not JSON"))?;
    let Value::Object(input) = value else {
        return Err(invalid("body", "must be a JSON object"));
    };
    let thread_id = string(&input, "threadId", "threadId")?.to_string();
    let run_id = string(&input, "runId", "runId")?.to_string();
    let forwarded = match input.get("forwardedProps") {
        None | Some(Value::Null) => None,
        Some(Value::Object(props)) => Some(props),
        Some(_) => return Err(invalid("forwardedProps", "must be an object")),
    };
    let model = match forwarded.and_then(|p| p.get("model")) {
        None | Some(Value::Null) => default_model.map(str::to_string),
        Some(Value::String(model)) if !model.is_empty() => Some(model.clone()),
        Some(_) => {
            return Err(invalid(
                "forwardedProps.model",
                "must be a non-empty string",
            ));
        }
    };
    let Some(model) = model else {
        let message = "is required: no [ag_ui] model is configured";
        return Err(invalid("forwardedProps.model", message));
    };
    let mut items = Vec::new();
    if let Some(context) = context(&input)? {
        items.push(json!({"type": "message", "role": "developer", "content": context}));
    }
    let Some(Value::Array(messages)) = input.get("messages") else {
        return Err(invalid("messages", "must be a list of messages"));
    };
    for (i, message) in messages.iter().enumerate() {
        message_items(message, &format!("messages[{i}]"), &mut items)?;
    }
    let (tools, client_tools) = tools(&input)?;
    let mut request = Map::new();
    request.insert("model".into(), Value::String(model));
    request.insert("input".into(), Value::Array(items));
    if !tools.is_empty() {
        request.insert("tools".into(), Value::Array(tools));
    }
    request.insert("stream".into(), Value::Bool(true));
    let body = serde_json::to_vec(&Value::Object(request)).expect("a JSON value serializes");
    Ok(Run {
        thread_id,
        run_id,
        client_tools,
        body,
    })
}

fn string<'a>(object: &'a Map<String, Value>, key: &str, field: &str) -> Result<&'a str, Invalid> {
    match object.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(invalid(field, "must be a string")),
        None => Err(invalid(field, "is required")),
    }
}

/// The `context` entries as the text of one developer message; `None` without entries.
fn context(input: &Map<String, Value>) -> Result<Option<String>, Invalid> {
    let entries = match input.get("context") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err(invalid("context", "must be a list")),
    };
    let mut lines = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let field = format!("context[{i}]");
        let Value::Object(entry) = entry else {
            return Err(invalid(field, "must be an object"));
        };
        let description = string(entry, "description", &format!("{field}.description"))?;
        let value = string(entry, "value", &format!("{field}.value"))?;
        lines.push(format!("{description}: {value}"));
    }
    Ok((!lines.is_empty()).then(|| lines.join("\n")))
}

/// The input items of one message, appended to `items`.
fn message_items(message: &Value, field: &str, items: &mut Vec<Value>) -> Result<(), Invalid> {
    let Value::Object(message) = message else {
        return Err(invalid(field, "must be an object"));
    };
    let role = string(message, "role", &format!("{field}.role"))?;
    let content_field = format!("{field}.content");
    match role {
        "system" | "developer" => {
            let content = string(message, "content", &content_field)?;
            items.push(json!({"type": "message", "role": role, "content": content}));
        }
        "user" => {
            let content = user_content(message.get("content"), &content_field)?;
            items.push(json!({"type": "message", "role": "user", "content": content}));
        }
        "assistant" => {
            match message.get("content") {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) if text.is_empty() => {}
                Some(Value::String(text)) => {
                    items.push(json!({"type": "message", "role": "assistant", "content": text}));
                }
                Some(_) => return Err(invalid(content_field, "must be a string")),
            }
            let calls = match message.get("toolCalls") {
                None | Some(Value::Null) => &Vec::new(),
                Some(Value::Array(calls)) => calls,
                Some(_) => return Err(invalid(format!("{field}.toolCalls"), "must be a list")),
            };
            for (j, call) in calls.iter().enumerate() {
                let field = format!("{field}.toolCalls[{j}]");
                let Value::Object(call) = call else {
                    return Err(invalid(field, "must be an object"));
                };
                let id = string(call, "id", &format!("{field}.id"))?;
                let Some(Value::Object(function)) = call.get("function") else {
                    return Err(invalid(format!("{field}.function"), "must be an object"));
                };
                let name = string(function, "name", &format!("{field}.function.name"))?;
                let arguments = string(
                    function,
                    "arguments",
                    &format!("{field}.function.arguments"),
                )?;
                items.push(json!({"type": "function_call", "call_id": id, "name": name, "arguments": arguments}));
            }
        }
        "tool" => {
            let call_id = string(message, "toolCallId", &format!("{field}.toolCallId"))?;
            let output = match message.get("content") {
                Some(Value::String(text)) => Value::String(text.clone()),
                Some(Value::Array(parts)) => Value::Array(input_parts(parts, &content_field)?),
                _ => {
                    return Err(invalid(
                        content_field,
                        "must be a string or a list of parts",
                    ));
                }
            };
            items.push(
                json!({"type": "function_call_output", "call_id": call_id, "output": output}),
            );
        }
        "activity" | "reasoning" => {}
        _ => {
            let message =
                "must be one of developer, system, assistant, user, tool, activity, reasoning";
            return Err(invalid(format!("{field}.role"), message));
        }
    }
    Ok(())
}

/// A user message's content: its text, or its parts as input parts.
fn user_content(content: Option<&Value>, field: &str) -> Result<Value, Invalid> {
    match content {
        Some(Value::String(text)) => Ok(Value::String(text.clone())),
        Some(Value::Array(parts)) => Ok(Value::Array(input_parts(parts, field)?)),
        _ => Err(invalid(field, "must be a string or a list of parts")),
    }
}

/// Content parts as Responses input parts: text, and images given by URL or data.
fn input_parts(parts: &[Value], field: &str) -> Result<Vec<Value>, Invalid> {
    let mut out = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let field = format!("{field}[{i}]");
        let Value::Object(part) = part else {
            return Err(invalid(field, "must be an object"));
        };
        match string(part, "type", &format!("{field}.type"))? {
            "text" => {
                let text = string(part, "text", &format!("{field}.text"))?;
                out.push(json!({"type": "input_text", "text": text}));
            }
            "image" => {
                let Some(Value::Object(source)) = part.get("source") else {
                    return Err(invalid(format!("{field}.source"), "must be an object"));
                };
                let value = string(source, "value", &format!("{field}.source.value"))?;
                let url = match source.get("type").and_then(Value::as_str) {
                    Some("url") => value.to_string(),
                    Some("data") => {
                        let mime = string(source, "mimeType", &format!("{field}.source.mimeType"))?;
                        format!("data:{mime};base64,{value}")
                    }
                    _ => {
                        let message = "must be url or data";
                        return Err(invalid(format!("{field}.source.type"), message));
                    }
                };
                out.push(json!({"type": "input_image", "image_url": url}));
            }
            _ => return Err(invalid(format!("{field}.type"), "must be text or image")),
        }
    }
    Ok(out)
}

/// The input's tools as function tools, and their names.
fn tools(input: &Map<String, Value>) -> Result<(Vec<Value>, Vec<String>), Invalid> {
    let list = match input.get("tools") {
        None | Some(Value::Null) => return Ok((Vec::new(), Vec::new())),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(invalid("tools", "must be a list")),
    };
    let (mut tools, mut names) = (Vec::new(), Vec::new());
    for (i, tool) in list.iter().enumerate() {
        let field = format!("tools[{i}]");
        let Value::Object(tool) = tool else {
            return Err(invalid(field, "must be an object"));
        };
        let name = string(tool, "name", &format!("{field}.name"))?;
        let description = match tool.get("description") {
            None | Some(Value::Null) => "",
            Some(Value::String(d)) => d,
            Some(_) => return Err(invalid(format!("{field}.description"), "must be a string")),
        };
        let parameters = match tool.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => return Err(invalid(format!("{field}.parameters"), "must be an object")),
        };
        tools.push(json!({"type": "function", "name": name, "description": description, "parameters": parameters, "strict": false}));
        names.push(name.to_string());
    }
    Ok((tools, names))
}

#[cfg(test)]
mod tests;
