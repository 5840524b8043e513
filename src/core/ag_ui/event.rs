//! AG-UI events as `@ag-ui/encoder` writes them: one `data: <event JSON>` line and a blank line
//! per event, no `event:` or `id:` lines. Only the events the translator emits are here.

use serde::Serialize;
use serde_json::Value;

/// One AG-UI event (the field names are the protocol's, camelCase).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AgUiEvent<'a> {
    #[serde(rename_all = "camelCase")]
    RunStarted { thread_id: &'a str, run_id: &'a str },
    #[serde(rename_all = "camelCase")]
    RunFinished { thread_id: &'a str, run_id: &'a str },
    #[serde(rename_all = "camelCase")]
    RunError {
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<&'a str>,
    },
    #[serde(rename_all = "camelCase")]
    TextMessageStart { message_id: &'a str, role: &'a str },
    #[serde(rename_all = "camelCase")]
    TextMessageContent { message_id: &'a str, delta: &'a str },
    #[serde(rename_all = "camelCase")]
    TextMessageEnd { message_id: &'a str },
    #[serde(rename_all = "camelCase")]
    ReasoningStart { message_id: &'a str },
    #[serde(rename_all = "camelCase")]
    ReasoningMessageStart { message_id: &'a str, role: &'a str },
    #[serde(rename_all = "camelCase")]
    ReasoningMessageContent { message_id: &'a str, delta: &'a str },
    #[serde(rename_all = "camelCase")]
    ReasoningMessageEnd { message_id: &'a str },
    #[serde(rename_all = "camelCase")]
    ReasoningEnd { message_id: &'a str },
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        tool_call_id: &'a str,
        tool_call_name: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallArgs {
        tool_call_id: &'a str,
        delta: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallEnd { tool_call_id: &'a str },
    #[serde(rename_all = "camelCase")]
    ToolCallResult {
        message_id: &'a str,
        tool_call_id: &'a str,
        content: &'a str,
        role: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    ActivitySnapshot {
        message_id: &'a str,
        activity_type: &'a str,
        content: Value,
    },
    #[serde(rename_all = "camelCase")]
    ActivityDelta {
        message_id: &'a str,
        activity_type: &'a str,
        patch: Value,
    },
}

/// Writes `event` as one SSE event to `out`.
pub fn encode(event: &AgUiEvent<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"data: ");
    // Serializing these types cannot fail: string keys, no maps with other keys, no floats
    // but finite ones (progress values are checked finite where they enter).
    serde_json::to_writer(&mut *out, event).expect("an AG-UI event serializes");
    out.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_data_lines_with_the_protocols_names() {
        let mut out = Vec::new();
        encode(
            &AgUiEvent::RunStarted {
                thread_id: "t",
                run_id: "r",
            },
            &mut out,
        );
        let start = AgUiEvent::ToolCallStart {
            tool_call_id: "c",
            tool_call_name: "web_search",
        };
        encode(&start, &mut out);
        encode(
            &AgUiEvent::RunError {
                message: "boom",
                code: None,
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).expect("valid"),
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
             data: {\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"c\",\"toolCallName\":\"web_search\"}\n\n\
             data: {\"type\":\"RUN_ERROR\",\"message\":\"boom\"}\n\n"
        );
    }
}
