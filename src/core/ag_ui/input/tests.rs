use serde_json::{Value, json};

use super::*;

fn body(run: &Run) -> Value {
    serde_json::from_slice(&run.body).expect("valid")
}

#[test]
fn a_run_becomes_one_streamed_request_with_its_history_exact() {
    let input = json!({
        "threadId": "t1", "runId": "r2", "state": {"x": 1},
        "forwardedProps": {"model": "gpt-x", "other": true},
        "context": [{"description": "page", "value": "/orders"}, {"description": "user", "value": "ann"}],
        "tools": [{"name": "confirm", "description": "Ask the user", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}],
        "messages": [
            {"id": "s", "role": "system", "content": "Be brief."},
            {"id": "u", "role": "user", "content": "Find issues"},
            {"id": "a1", "role": "assistant", "toolCalls": [
                {"id": "call_web_1", "type": "function", "function": {"name": "web_search", "arguments": "{\"query\":\"x\"}"}}]},
            {"id": "act", "role": "activity", "activityType": "tool_call", "content": {"status": "completed"}},
            {"id": "t", "role": "tool", "toolCallId": "call_web_1", "content": "[{\"title\": \"A\"}]\n"},
            {"id": "rs", "role": "reasoning", "content": "hm"},
            {"id": "a2", "role": "assistant", "content": "Done.", "toolCalls": [
                {"id": "call_c", "type": "function", "function": {"name": "confirm", "arguments": "{}"}}]},
            {"id": "t2", "role": "tool", "toolCallId": "call_c", "content": "yes"},
            {"id": "d", "role": "developer", "content": "dev"},
            {"id": "u2", "role": "user", "content": [{"type": "text", "text": "and this"},
                {"type": "image", "source": {"type": "url", "value": "https://x/i.png"}}]}
        ]
    });
    let run = translate(input.to_string().as_bytes(), Some("default")).expect("valid");
    assert_eq!((run.thread_id.as_str(), run.run_id.as_str()), ("t1", "r2"));
    assert_eq!(run.client_tools, ["confirm"]);
    assert_eq!(
        body(&run),
        json!({
            "model": "gpt-x",
            "input": [
                {"type": "message", "role": "developer", "content": "page: /orders\nuser: ann"},
                {"type": "message", "role": "system", "content": "Be brief."},
                {"type": "message", "role": "user", "content": "Find issues"},
                {"type": "function_call", "call_id": "call_web_1", "name": "web_search", "arguments": "{\"query\":\"x\"}"},
                {"type": "function_call_output", "call_id": "call_web_1", "output": "[{\"title\": \"A\"}]\n"},
                {"type": "message", "role": "assistant", "content": "Done."},
                {"type": "function_call", "call_id": "call_c", "name": "confirm", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_c", "output": "yes"},
                {"type": "message", "role": "developer", "content": "dev"},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "and this"},
                    {"type": "input_image", "image_url": "https://x/i.png"}]}
            ],
            "tools": [{"type": "function", "name": "confirm", "description": "Ask the user",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}, "strict": false}],
            "stream": true
        })
    );
}

#[test]
fn the_model_is_the_configured_one_unless_forwarded() {
    let input = json!({"threadId": "t", "runId": "r", "messages": []}).to_string();
    let run = translate(input.as_bytes(), Some("gpt-default")).expect("valid");
    assert_eq!(
        body(&run),
        json!({"model": "gpt-default", "input": [], "stream": true})
    );
    let error = translate(input.as_bytes(), None).expect_err("an error");
    assert_eq!(error.field, "forwardedProps.model");
}

#[test]
fn an_invalid_input_names_its_field() {
    let cases = [
        (json!([1]), "body"),
        (json!({"runId": "r", "messages": []}), "threadId"),
        (
            json!({"threadId": 1, "runId": "r", "messages": []}),
            "threadId",
        ),
        (json!({"threadId": "t", "messages": []}), "runId"),
        (json!({"threadId": "t", "runId": "r"}), "messages"),
        (
            json!({"threadId": "t", "runId": "r", "messages": [{"role": "robot"}]}),
            "messages[0].role",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [{"role": "user"}]}),
            "messages[0].content",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [{"role": "tool", "content": "x"}]}),
            "messages[0].toolCallId",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [{"role": "assistant", "toolCalls": [{"id": "c", "function": {"name": "f"}}]}]}),
            "messages[0].toolCalls[0].function.arguments",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [], "tools": [{"description": "d"}]}),
            "tools[0].name",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [], "context": [{"description": "d"}]}),
            "context[0].value",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [], "forwardedProps": {"model": 5}}),
            "forwardedProps.model",
        ),
    ];
    for (input, field) in cases {
        let error = translate(input.to_string().as_bytes(), Some("m")).expect_err("an error");
        assert_eq!(error.field, field, "{input}");
    }
    assert_eq!(
        translate(b"{", Some("m")).expect_err("an error").field,
        "body"
    );
}
