//! The translator at the edges: reasoning, recorded streams, ids a gateway repeats, the open
//! calls' limit (helpers in `tests`).

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::Translator;
use super::tests::{CONFIG, checked, fixture, run};
use crate::config::Config;

#[test]
fn reasoning_summaries_become_reasoning_messages() {
    let input = br#"data: {"type":"response.created","response":{"id":"r"}}

data: {"type":"response.output_item.added","item":{"id":"rs_1","type":"reasoning","summary":[]}}

data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_1","summary_index":0,"delta":"Think"}

data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_1","summary_index":0,"delta":"ing."}

data: {"type":"response.reasoning_summary_text.done","item_id":"rs_1","summary_index":0,"text":"Thinking."}

data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_1","summary_index":1,"delta":"More."}

data: {"type":"response.output_item.done","item":{"id":"rs_1","type":"reasoning"}}

data: {"type":"response.output_item.added","item":{"id":"m","type":"message"}}

data: {"type":"response.output_item.done","item":{"id":"m","type":"message","content":[{"type":"output_text","text":"Done."}]}}

data: {"type":"response.completed","response":{"id":"r"}}

data: [DONE]

"#;
    let events = checked(&run(input, &[], usize::MAX));
    let all: Vec<_> = events
        .iter()
        .map(|e| e["type"].as_str().expect("valid"))
        .collect();
    assert_eq!(
        all,
        [
            "RUN_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(events[2]["messageId"], "rs_1-0");
    assert_eq!(events[11]["delta"], "Done.");
}

#[test]
fn recorded_streams_are_valid_runs() {
    let dir = format!("{}/tests/fixtures/recordings", env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    let folders = std::fs::read_dir(&dir).expect("valid").flatten();
    for entry in folders.flat_map(|f| std::fs::read_dir(f.path()).into_iter().flatten().flatten()) {
        let name = entry.path().display().to_string();
        if !name.ends_with(".sse") {
            continue;
        }
        let input = std::fs::read(entry.path()).expect("valid");
        for piece in [usize::MAX, 5] {
            let out = run(&input, &[], piece);
            invariants::ag_ui::check(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        seen += 1;
    }
    assert!(seen > 0, "no recordings in {dir}");
}

#[test]
fn open_calls_stay_within_the_limit_and_the_run_stays_valid() {
    let mut settings = (*Config::from_toml_str(CONFIG).expect("valid").settings()).clone();
    settings.limits.max_open_calls = 1;
    let mut t = Translator::new(Arc::new(settings), "t".into(), "r".into());
    let now = Instant::now();
    let mut out = t.start().to_vec();
    out.extend_from_slice(&t.feed(&fixture("parallel"), now));
    out.extend_from_slice(&t.finish(now));
    let report = invariants::ag_ui::check(&out).expect("valid");
    assert_eq!(report.tool_calls, 1);
    assert_eq!(t.stats().untracked.open_calls, 1);
}

#[test]
fn ids_a_gateway_repeats_stay_one_message_and_one_call_each() {
    let response = r#"data: {"type":"response.created","response":{"id":"r"}}

data: {"type":"response.output_item.added","item":{"id":"fc","type":"function_call","call_id":"call_1","name":"web_search","arguments":""}}

data: {"type":"response.output_item.done","item":{"id":"fc","type":"function_call","call_id":"call_1","name":"web_search","arguments":"{}"}}

data: {"type":"response.output_item.added","item":{"id":"o","type":"function_call_output","call_id":"call_1","output":"ok"}}

data: {"type":"response.output_item.added","item":{"id":"msg_1","type":"message"}}

data: {"type":"response.output_text.delta","item_id":"msg_1","delta":"Hi"}

data: {"type":"response.output_item.done","item":{"id":"msg_1","type":"message"}}

data: {"type":"response.completed","response":{"id":"r"}}

"#;
    let twice = response.repeat(2);
    let events = checked(&run(twice.as_bytes(), &[], 7));
    let starts: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_START")
        .map(|e| e["toolCallId"].clone())
        .collect();
    assert_eq!(starts, [json!("call_1"), json!("call-run-1-1")]);
    let texts: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_START")
        .map(|e| e["messageId"].clone())
        .collect();
    assert_eq!(texts, [json!("msg_1"), json!("msg-run-1-2")]);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "RUN_FINISHED")
            .count(),
        1
    );
}
