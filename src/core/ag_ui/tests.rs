//! The translator over the scripted gateway's streams (`tests/fixtures/ag_ui/`, written by
//! `sdk-tests/gateway.py`) and recorded ones, each output checked by the oracle's AG-UI checker.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::*;
use crate::config::Config;

pub(super) const CONFIG: &str = r#"
[[tools]]
match = ["github_*"]
kind = "mcp"

[failure]
output_patterns = ["^no executor found for tool ", "^search failed: "]
"#;

pub(super) fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/ag_ui/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub(super) fn translator(client_tools: &[&str]) -> Translator {
    let settings = Config::from_toml_str(CONFIG).expect("valid").settings();
    let tools = client_tools.iter().map(|s| s.to_string()).collect();
    Translator::new(settings, "thread-1".into(), "run-1".into()).with_client_tools(tools)
}

/// The whole run over `input` fed in pieces of at most `piece` bytes.
pub(super) fn run(input: &[u8], client_tools: &[&str], piece: usize) -> Vec<u8> {
    let now = Instant::now();
    let mut t = translator(client_tools);
    let mut out = t.start().to_vec();
    for chunk in input.chunks(piece) {
        out.extend_from_slice(&t.feed(chunk, now));
    }
    out.extend_from_slice(&t.finish(now));
    out
}

pub(super) fn checked(output: &[u8]) -> Vec<Map<String, Value>> {
    let report = invariants::ag_ui::check(output).unwrap_or_else(|e| {
        panic!("{e}\n{}", String::from_utf8_lossy(output));
    });
    assert!(report.events > 0);
    invariants::ag_ui::events(output).expect("valid")
}

pub(super) fn types(events: &[Map<String, Value>]) -> Vec<String> {
    let name = |e: &Map<String, Value>| {
        let kind = e["type"].as_str().expect("valid").to_string();
        match e.get("toolCallId").or(e.get("messageId")) {
            Some(Value::String(id)) => format!("{kind} {id}"),
            _ => kind,
        }
    };
    events
        .iter()
        .map(name)
        .filter(|n| !n.starts_with("TEXT_MESSAGE_CONTENT"))
        .collect()
}

#[test]
fn the_agentic_stream_is_a_run_with_each_call_running_and_its_result() {
    let out = run(&fixture("agentic"), &[], usize::MAX);
    let events = checked(&out);
    let activity = |id: &str| format!("ACTIVITY_SNAPSHOT activity-{id}");
    let delta = |id: &str| format!("ACTIVITY_DELTA activity-{id}");
    let mut expected = vec!["RUN_STARTED".to_string()];
    for id in ["call_web_1", "call_file_1"] {
        expected.extend([format!("TOOL_CALL_START {id}"), activity(id)]);
        expected.extend([
            format!("TOOL_CALL_ARGS {id}"),
            format!("TOOL_CALL_ARGS {id}"),
        ]);
        expected.extend([format!("TOOL_CALL_END {id}"), delta(id)]);
        expected.extend([format!("TOOL_CALL_RESULT {id}"), delta(id)]);
    }
    // Two MCP calls of one turn: the second is called before the first's output; only the
    // first has a query.
    for id in ["call_gh_1", "call_gb_1"] {
        expected.extend([format!("TOOL_CALL_START {id}"), activity(id)]);
        expected.extend([
            format!("TOOL_CALL_ARGS {id}"),
            format!("TOOL_CALL_ARGS {id}"),
        ]);
        expected.push(format!("TOOL_CALL_END {id}"));
        if id == "call_gh_1" {
            expected.push(delta(id));
        }
    }
    for id in ["call_gb_1", "call_gh_1"] {
        expected.extend([format!("TOOL_CALL_RESULT {id}"), delta(id)]);
    }
    expected.extend([
        "TEXT_MESSAGE_START msg_e2e_8".into(),
        "TEXT_MESSAGE_END msg_e2e_8".into(),
    ]);
    expected.push("RUN_FINISHED".into());
    assert_eq!(types(&events), expected);
    let find = |kind: &str, id: &str| {
        events
            .iter()
            .filter(|e| {
                e["type"] == kind
                    && (e.get("toolCallId") == Some(&json!(id))
                        || e.get("messageId") == Some(&json!(format!("activity-{id}"))))
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    let snapshot = &find("ACTIVITY_SNAPSHOT", "call_web_1")[0];
    assert_eq!(snapshot["activityType"], "tool_call");
    assert_eq!(
        snapshot["content"],
        json!({"toolCallId": "call_web_1", "kind": "web_search", "status": "running"})
    );
    let deltas = find("ACTIVITY_DELTA", "call_web_1");
    assert_eq!(
        deltas[0]["patch"],
        json!([{"op": "add", "path": "/query", "value": "tool lifecycle events SSE"}])
    );
    assert_eq!(
        deltas[1]["patch"],
        json!([{"op": "add", "path": "/status", "value": "completed"}])
    );
    let result = &find("TOOL_CALL_RESULT", "call_gb_1")[0];
    assert_eq!(
        result["content"],
        "no executor found for tool github_broken"
    );
    assert_eq!(result["messageId"], "result-call_gb_1");
    let last = find("ACTIVITY_DELTA", "call_gb_1").pop().expect("valid");
    assert_eq!(
        last["patch"],
        json!([{"op": "add", "path": "/status", "value": "failed"}])
    );
    let snapshot = &find("ACTIVITY_SNAPSHOT", "call_gh_1")[0];
    assert_eq!(snapshot["content"]["kind"], "mcp");
    let args: String = find("TOOL_CALL_ARGS", "call_gh_1")
        .iter()
        .map(|e| e["delta"].as_str().expect("valid"))
        .collect();
    assert_eq!(args, r#"{"repo":"acme/agent","query":"stream stalls"}"#);
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().expect("valid"))
        .collect();
    assert!(text.starts_with("I found two open issues"), "{text}");
    assert_eq!(
        events[0],
        *json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"})
            .as_object()
            .expect("valid")
    );
}

#[test]
fn the_output_does_not_depend_on_how_the_input_is_split() {
    for name in ["agentic", "failures", "frontend", "parallel"] {
        let input = fixture(name);
        let whole = run(&input, &["confirm_action"], usize::MAX);
        checked(&whole);
        for piece in [1, 2, 3, 7, 64, 1000] {
            assert_eq!(
                run(&input, &["confirm_action"], piece),
                whole,
                "{name} in pieces of {piece}"
            );
        }
        // Pieces of varying sizes (a fixed pseudo-random sequence).
        let now = Instant::now();
        let mut t = translator(&["confirm_action"]);
        let mut out = t.start().to_vec();
        let (mut at, mut seed) = (0, 0x9e37_79b9_u32);
        while at < input.len() {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let end = (at + 1 + (seed >> 24) as usize).min(input.len());
            out.extend_from_slice(&t.feed(&input[at..end], now));
            at = end;
        }
        out.extend_from_slice(&t.finish(now));
        assert_eq!(out, whole, "{name} in varying pieces");
    }
}

#[test]
fn a_call_the_stream_ends_without_an_output_ends_failed_without_a_result() {
    let events = checked(&run(&fixture("failures"), &[], usize::MAX));
    let of = |id: &str| {
        events
            .iter()
            .filter(|e| {
                e.get("toolCallId") == Some(&json!(id))
                    || e.get("messageId") == Some(&json!(format!("activity-{id}")))
            })
            .map(|e| e["type"].as_str().expect("valid").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of("call_gh_2"),
        [
            "TOOL_CALL_START",
            "ACTIVITY_SNAPSHOT",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "ACTIVITY_DELTA",
            "ACTIVITY_DELTA"
        ]
    );
    let last = events
        .iter()
        .rfind(|e| e.get("messageId") == Some(&json!("activity-call_gh_2")))
        .expect("valid");
    assert_eq!(
        last["patch"],
        json!([{"op": "add", "path": "/status", "value": "failed"}])
    );
    // The file search's `queries`, and the web search that failed by its output.
    let file = events
        .iter()
        .find(|e| {
            e.get("messageId") == Some(&json!("activity-call_file_2"))
                && e["type"] == "ACTIVITY_DELTA"
        })
        .expect("valid");
    assert_eq!(file["patch"][0]["value"], "retry policy, backoff");
    let report = invariants::ag_ui::check(&run(&fixture("failures"), &[], 5)).expect("valid");
    assert_eq!(
        (report.tool_calls, report.results, report.failed),
        (4, 3, 3)
    );
    assert!(report.finished);
}

#[test]
fn a_call_of_a_declared_tool_is_the_clients_start_arguments_end_only() {
    let events = checked(&run(&fixture("frontend"), &["confirm_action"], usize::MAX));
    let of = |id: &str| {
        events
            .iter()
            .filter(|e| {
                e.get("toolCallId") == Some(&json!(id))
                    || e.get("messageId") == Some(&json!(format!("activity-{id}")))
            })
            .map(|e| e["type"].as_str().expect("valid").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of("call_confirm_1"),
        [
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END"
        ]
    );
    assert_eq!(of("call_web_1").last().expect("valid"), "ACTIVITY_DELTA");
    assert_eq!(events.last().expect("valid")["type"], "RUN_FINISHED");
    // Undeclared, the same call is the gateway's, and it never answered.
    let events = checked(&run(&fixture("frontend"), &[], usize::MAX));
    assert!(
        events
            .iter()
            .any(|e| e.get("messageId") == Some(&json!("activity-call_confirm_1")))
    );
}

#[test]
fn progress_patches_the_running_calls_activity_before_its_result() {
    let input = fixture("agentic");
    let text = std::str::from_utf8(&input).expect("valid");
    // Up to the broken call's output: both MCP calls run.
    let cut = text
        .find(r#""call_id":"call_gb_1","output""#)
        .expect("valid");
    let cut = text[..cut].rfind("event:").expect("valid");
    let now = Instant::now();
    let mut t = translator(&[]);
    let mut out = t.start().to_vec();
    out.extend_from_slice(&t.feed(&input[..cut], now));
    let report = Progress {
        progress: 1.0,
        total: Some(3.0),
        message: Some("step 1/3".into()),
    };
    let progress = t.progress("call_gh_1", report, now + Duration::from_millis(5));
    assert!(
        t.progress(
            "call_nope",
            Progress {
                progress: 1.0,
                total: None,
                message: None
            },
            now
        )
        .is_empty()
    );
    out.extend_from_slice(&progress);
    out.extend_from_slice(&t.feed(&input[cut..], now));
    out.extend_from_slice(&t.finish(now));
    let events = checked(&out);
    let progress: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "ACTIVITY_DELTA" && e["patch"][0]["path"] == "/progress")
        .collect();
    assert_eq!(progress.len(), 1);
    assert_eq!(progress[0]["messageId"], "activity-call_gh_1");
    assert_eq!(
        progress[0]["patch"],
        json!([
        {"op": "add", "path": "/progress", "value": 1.0},
        {"op": "add", "path": "/total", "value": 3.0},
        {"op": "add", "path": "/message", "value": "step 1/3"}])
    );
    let observed: Vec<_> = t.take_observations().collect();
    assert!(
        observed.iter().any(
            |o| matches!(o, Observation::CallFinished { call_id, .. } if call_id == "call_gh_1")
        )
    );
}

#[test]
fn a_stream_without_its_end_or_that_fails_ends_the_run_with_an_error() {
    let input = fixture("agentic");
    let text = std::str::from_utf8(&input).expect("valid");
    let cut = text
        .find(r#""call_id":"call_gh_1","output""#)
        .expect("valid");
    let events = checked(&run(&input[..cut], &[], usize::MAX));
    let last = events.last().expect("valid");
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(
        last["message"],
        "the gateway's stream ended before its response did"
    );
    // Every call started is ended; the one cut off before its output ends failed, as does
    // the broken one by its output.
    let report = invariants::ag_ui::check(&run(&input[..cut], &[], 9)).expect("valid");
    assert_eq!(
        (report.tool_calls, report.results, report.failed),
        (4, 3, 2)
    );

    let failed = br#"data: {"type":"response.created","response":{"id":"r"}}

data: {"type":"response.output_item.added","item":{"id":"m","type":"message"}}

data: {"type":"response.output_text.delta","item_id":"m","delta":"Hel"}

data: {"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"The model crashed."}}}

"#;
    let events = checked(&run(failed, &[], usize::MAX));
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START m",
            "TEXT_MESSAGE_END m",
            "RUN_ERROR"
        ]
    );
    let last = events.last().expect("valid");
    assert_eq!(
        (&last["message"], &last["code"]),
        (&json!("The model crashed."), &json!("server_error"))
    );

    let now = Instant::now();
    let mut t = translator(&[]);
    let mut out = t.start().to_vec();
    out.extend_from_slice(&t.feed(&input[..cut], now));
    out.extend_from_slice(&t.fail("upstream stream broke", Some("broken_stream"), now));
    assert!(t.is_over());
    out.extend_from_slice(&t.feed(&input[cut..], now));
    out.extend_from_slice(&t.finish(now));
    let events = checked(&out);
    assert_eq!(
        events.last().expect("valid")["message"],
        "upstream stream broke"
    );
}
