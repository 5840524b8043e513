//! A checker of the stream's guarantees (docs/profiles.md, docs/stream-rules.md) over one upstream input and the rewriter's output,
//! written independently of the rewriter's own reading of events (it compares raw bytes and
//! serde_json values), so tests and fuzz targets can use it as an oracle:
//!
//! 1. dense renumbering: numbers in the output are consecutive wherever the input's were, and an
//!    upstream event differs from its input bytes only in its `sequence_number` and
//!    `output_index` digits and the companions spliced into a `response.output` it lists (an
//!    event over `max_event_bytes` is forwarded unread, so density resumes at the next upstream
//!    event read after it, as the README says);
//! 2. exactly once: every injected opening event (`in_progress`, stage `start`, `tool_call_start`,
//!    `tool_start`) is closed by exactly one terminal event of its profile, after it; every
//!    companion item is added once and done once, after its terminal event;
//! 3. untouched when nothing to do: no injected event means output == input;
//! 4. lose nothing: every input event appears in the output, in order; so does an unterminated
//!    tail. Injected events have the documented shape (no top-level `error`, an `item_id` the
//!    client has already seen: a companion at its own `output_index`, or the call item itself);
//! 5. indices: within a response, an upstream item (introduced by an `output_item.added` or
//!    `.done`) keeps one `output_index` on all its events, items keep their order, no index is
//!    shared, and a companion's is above all used before it.
//!
//! A crate of its own, outside the product's library: toolpulse's integration tests, unit tests
//! of the rewriter, bench client (an example) and fuzz targets depend on it, the binary never
//! does.

pub mod ag_ui;
mod calls;
pub mod hosted;
mod indices;
mod mended;
mod numbers;
mod rules;
mod upstream;

use serde_json::{Map, Value};
use toolpulse::core::sse::{Event, Item, Parser};

use calls::Calls;
use numbers::Numbers;

/// Counts responses as the rewriter does: each `response.created` starts one, and the events
/// before the first belong to the response it opens.
#[derive(Default)]
struct Responses(usize);

impl Responses {
    /// Whether `json` starts a response after the first (one with state of its own).
    fn starts_another(&mut self, json: &Map<String, Value>) -> bool {
        if json.get("type").and_then(Value::as_str) != Some("response.created") {
            return false;
        }
        self.0 += 1;
        self.0 > 1
    }
}

/// The id prefix of companion items.
const COMPANION_PREFIX: &str = toolpulse::core::profiles::openai::COMPANION_PREFIX;

const IN_PROGRESS: &[&str] = &[
    "response.mcp_call.in_progress",
    "response.web_search_call.in_progress",
    "response.file_search_call.in_progress",
];
const SEARCHING: &[&str] = &[
    "response.web_search_call.searching",
    "response.file_search_call.searching",
];
/// Profile `progress`'s events: a middle step of the companion's life.
const PROGRESS: &[&str] = &[
    "response.mcp_call.progress",
    "response.web_search_call.progress",
    "response.file_search_call.progress",
];
const ITEM_EVENTS: &[&str] = &["response.output_item.added", "response.output_item.done"];
const TERMINAL: &[&str] = &[
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.web_search_call.completed",
    "response.file_search_call.completed",
];

/// What the checker counted, for tests that want more than "it holds".
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub upstream_events: usize,
    pub injected_events: usize,
    pub heartbeats: usize,
    pub renumbered: usize,
}

/// `input` as the rewriter must repair it (docs/stream-rules.md): what its output is made of.
pub fn mended_input(input: &[u8], max_event_bytes: usize) -> Vec<u8> {
    mended::mend(input, max_event_bytes)
}

/// Checks `output` against `input`. `max_event_bytes` is the limit the rewriter ran with: when
/// the input ends inside an event longer than it, calls may stay unclosed (nothing can be
/// injected inside a half-sent event).
pub fn check(input: &[u8], output: &[u8], max_event_bytes: usize) -> Result<Report, String> {
    let mended = mended_input(input, max_event_bytes);
    let input = &mended[..];
    if hosted::applies(output) {
        return hosted::check(input, output, max_event_bytes);
    }
    let (inputs, input_tail) = split(input);
    let (outputs, output_tail) = split(output);
    if output_tail != input_tail {
        return Err("the unterminated tail of the input is not the end of the output".into());
    }
    let mut report = Report::default();
    let mut calls = Calls::default();
    let mut numbers = Numbers::new(&inputs);
    let mut next = 0;
    for (k, out) in outputs.iter().enumerate() {
        if let Some(inp) = inputs.get(next)
            && let Some(renumbered) =
                upstream::matches(inp, out).map_err(|e| format!("output event {k}: {e}"))?
        {
            next += 1;
            report.upstream_events += 1;
            report.renumbered += usize::from(renumbered);
            let read = inp.raw().len() <= max_event_bytes;
            if let Some(json) = json_of(out) {
                calls
                    .see_upstream(json_of(inp).as_ref(), &json, read)
                    .map_err(|e| format!("output event {k}: {e}"))?;
            }
            if !read {
                // Forwarded raw without being read: its number could not be shifted, so
                // density can only be asked of what follows it.
                numbers.restart();
            } else {
                numbers
                    .upstream(inp, out)
                    .map_err(|e| format!("output event {k}: {e}"))?;
            }
        } else if &out.raw()[..] == toolpulse::core::sse::HEARTBEAT {
            report.heartbeats += 1;
        } else {
            let json = injected_json(out)
                .map_err(|e| format!("output event {k} is neither upstream nor injected: {e}"))?;
            calls
                .see_injected(&json)
                .map_err(|e| format!("output event {k}: {e}"))?;
            numbers
                .injected(&json)
                .map_err(|e| format!("output event {k}: {e}"))?;
            report.injected_events += 1;
        }
    }
    if numbers.awaiting_new_run {
        return Err(format!(
            "injected numbers went back to {:?} and no upstream event starts a new run",
            numbers.last_out
        ));
    }
    if next != inputs.len() {
        return Err(format!(
            "input event {next} of {} never reached the output",
            inputs.len()
        ));
    }
    let ends_inside_oversize = input_tail.len() > max_event_bytes;
    if !calls.open.is_empty() && !ends_inside_oversize {
        return Err(format!("calls never closed: {:?}", calls.open));
    }
    if !calls.unfinished().is_empty() && !ends_inside_oversize {
        return Err(format!("companions never done: {:?}", calls.unfinished()));
    }
    if report.injected_events + report.heartbeats == 0 && input != output {
        return Err("nothing was injected, yet the output differs from the input".into());
    }
    let json = |events: &[Event]| events.iter().map(json_of).collect::<Vec<_>>();
    rules::kept(&json(&inputs), &json(&outputs))?;
    Ok(report)
}

/// Complete events and the unterminated tail.
fn split(bytes: &[u8]) -> (Vec<Event>, Vec<u8>) {
    let mut parser = Parser::new(usize::MAX);
    parser.push(bytes);
    parser.finish();
    let mut events = Vec::new();
    let mut tail = Vec::new();
    while let Some(item) = parser.next_item() {
        match item {
            Item::Event(e) => events.push(e),
            Item::Oversize(b) | Item::Incomplete(b) => tail.extend_from_slice(&b),
        }
    }
    (events, tail)
}

fn json_of(event: &Event) -> Option<Map<String, Value>> {
    serde_json::from_slice(&event.data()?).ok()
}

fn number_of(json: &Map<String, Value>) -> Option<u64> {
    json.get("sequence_number").and_then(Value::as_u64)
}

fn index_of(json: &Map<String, Value>) -> Option<u64> {
    json.get("output_index").and_then(Value::as_u64)
}

/// The payload profiles' event types (`stages`, `tool_call`, `tool`).
const PAYLOAD_TYPES: &[&str] = &[
    "tool.stage",
    "tool_call_start",
    "tool_call_end",
    "tool_call_error",
    "tool_call_progress",
    "tool_start",
    "tool_progress",
    "tool_end",
    "tool_error",
];

fn injected_json(event: &Event) -> Result<Map<String, Value>, String> {
    let json = json_of(event).ok_or("data is not a JSON object")?;
    let kind = json
        .get("type")
        .and_then(Value::as_str)
        .ok_or("no `type`")?;
    if let Some(line) = event.event_type()
        && line != kind.as_bytes()
    {
        return Err("`type` differs from the event line".into());
    }
    let openai = [IN_PROGRESS, SEARCHING, TERMINAL, ITEM_EVENTS, PROGRESS];
    if openai.iter().any(|set| set.contains(&kind)) {
        check_openai(event, kind, &json)?;
    } else if PAYLOAD_TYPES.contains(&kind) {
        let (_, id, _) = lifecycle_step(kind, &json)?;
        if id.is_empty() {
            return Err(format!("{kind} without its call id"));
        }
    } else {
        return Err(format!("unknown event type {kind:?}"));
    }
    Ok(json)
}

fn check_openai(event: &Event, kind: &str, json: &Map<String, Value>) -> Result<(), String> {
    if event.event_type().is_none() {
        return Err("an OpenAI event without its event line".into());
    }
    if json.contains_key("error") {
        return Err("a top-level `error` key".into());
    }
    if ITEM_EVENTS.contains(&kind) {
        return Ok(());
    }
    for key in ["item_id", "name"] {
        if !json.get(key).is_some_and(Value::is_string) {
            return Err(format!("`{key}` missing or not a string"));
        }
    }
    if TERMINAL.contains(&kind) {
        let outcome = json.get("outcome").and_then(Value::as_str);
        if !matches!(outcome, Some("completed" | "failed")) {
            return Err("terminal event without a valid `outcome`".into());
        }
        if json.get("duration_ms").and_then(Value::as_u64).is_none() {
            return Err("terminal event without `duration_ms`".into());
        }
    }
    Ok(())
}

/// Where an injected event stands in its call's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Open,
    Middle,
    Close,
}

/// An injected event's (profile family, call id, step).
pub(crate) fn lifecycle_step(
    kind: &str,
    json: &Map<String, Value>,
) -> Result<(String, String, Step), String> {
    let text = |key: &str| {
        json.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let step = |open: bool, close: bool| match (open, close) {
        (true, _) => Step::Open,
        (_, true) => Step::Close,
        _ => Step::Middle,
    };
    Ok(match kind {
        "tool.stage" => {
            let stage = text("stage");
            if !matches!(stage.as_str(), "start" | "streaming" | "running" | "end") {
                return Err(format!("unknown stage {stage:?}"));
            }
            (
                "stages".into(),
                text("id"),
                step(stage == "start", stage == "end"),
            )
        }
        "tool_call_start" | "tool_call_end" | "tool_call_error" | "tool_call_progress" => {
            let open = kind == "tool_call_start";
            let close = !open && kind != "tool_call_progress";
            ("tool_call".into(), text("toolCallId"), step(open, close))
        }
        "tool_start" | "tool_end" | "tool_error" | "tool_progress" => {
            let open = kind == "tool_start";
            let close = !open && kind != "tool_progress";
            ("tool".into(), text("tool_call_id"), step(open, close))
        }
        _ => {
            let family = kind.rsplit_once('.').map_or("", |(f, _)| f).to_string();
            let open = IN_PROGRESS.contains(&kind);
            (
                family,
                text("item_id"),
                step(open, TERMINAL.contains(&kind)),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &[u8] = b"data: {\"type\":\"a\",\"sequence_number\":0}\n\n";
    const ADDED: &[u8] = b"data: {\"type\":\"response.output_item.done\",\"sequence_number\":1,\"item\":{\"type\":\"function_call\",\"id\":\"fc\",\"call_id\":\"c\",\"name\":\"n\"}}\n\n";
    const B: &[u8] = b"data: {\"type\":\"b\",\"sequence_number\":2}\n\n";
    const B3: &[u8] = b"data: {\"type\":\"b\",\"sequence_number\":3}\n\n";
    const START: &[u8] = b"event: response.mcp_call.in_progress\ndata: {\"type\":\"response.mcp_call.in_progress\",\"sequence_number\":2,\"item_id\":\"fc\",\"output_index\":0,\"name\":\"n\"}\n\n";
    const END: &[u8] = b"event: response.mcp_call.failed\ndata: {\"type\":\"response.mcp_call.failed\",\"sequence_number\":3,\"item_id\":\"fc\",\"output_index\":0,\"name\":\"n\",\"outcome\":\"failed\",\"duration_ms\":1}\n\n";
    const END4: &[u8] = b"event: response.mcp_call.failed\ndata: {\"type\":\"response.mcp_call.failed\",\"sequence_number\":4,\"item_id\":\"fc\",\"output_index\":0,\"name\":\"n\",\"outcome\":\"failed\",\"duration_ms\":1}\n\n";

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// After a numbered event over the size limit (forwarded unread) no number is known, so
    /// events injected before the next numbered one read may go unnumbered (fuzz finding
    /// `unnumbered-injection-after-an-oversize-event`); had it been read, they may not.
    #[test]
    fn injections_after_an_unread_event_may_go_unnumbered() {
        let unnumbered = |e: &[u8]| {
            String::from_utf8_lossy(e)
                .replace("\"sequence_number\":1,", "")
                .replace("\"sequence_number\":2,", "")
                .replace("\"sequence_number\":3,", "")
                .into_bytes()
        };
        let (added, start, end) = (unnumbered(ADDED), unnumbered(START), unnumbered(END));
        let input = cat(&[A, &added]);
        let output = cat(&[A, &added, &start, &end]);
        check(&input, &output, A.len() - 1).expect("A went unread: no number known");
        let err = check(&input, &output, 1 << 20).expect_err("A was read");
        assert!(err.contains("without a number"), "{err}");
    }

    #[test]
    fn accepts_a_correct_rewrite() {
        let input = cat(&[A, ADDED, B]);
        assert!(check(&input, &input, 1 << 20).is_ok());
        let output = cat(&[A, ADDED, START, B3, END4]);
        let report = check(&input, &output, 1 << 20).expect("valid");
        assert_eq!((report.injected_events, report.renumbered), (2, 1));
    }

    #[test]
    fn rejects_each_violation() {
        let input = cat(&[A, ADDED, B]);
        let cases: &[(&[&[u8]], &str)] = &[
            (&[A, ADDED], "never reached"),
            (&[A, B, ADDED], "neither upstream nor injected"),
            (&[A, ADDED, START, B], "not dense"),
            (&[A, ADDED, START, B3], "never closed"),
            (&[A, ADDED, START, END, B3], "not dense"),
            (&[A, ADDED, END, B], "without its opening event"),
            (&[A, ADDED, b"data: x\n\n", B], "neither upstream"),
        ];
        for (parts, expected) in cases {
            let err = check(&input, &cat(parts), 1 << 20).expect_err(expected);
            assert!(err.contains(expected), "{expected}: got {err}");
        }
        let err = check(&input, &cat(&[START, A, ADDED, B3, END4]), 1 << 20).expect_err("unseen");
        assert!(err.contains("has not seen"), "{err}");
        let same_number_other_bytes = b"data: {\"type\":\"a\", \"sequence_number\":0}\n\n";
        let err = check(A, same_number_other_bytes, 1 << 20).expect_err("changed");
        assert!(err.contains("kept its number"), "{err}");
    }

    #[test]
    fn events_injected_before_a_new_run_take_its_numbers() {
        // Another response starts at 0 on the same connection; the call of the first one is
        // closed just before it, with the first number of the new run (the fuzzer's find).
        let end0 =
            String::from_utf8_lossy(END).replace("\"sequence_number\":3", "\"sequence_number\":0");
        let a1 = b"data: {\"type\":\"a\",\"sequence_number\":1}\n\n";
        let input = cat(&[A, ADDED, A]);
        let output = cat(&[A, ADDED, START, end0.as_bytes(), a1]);
        check(&input, &output, 1 << 20).expect("a new run opened by injected events");
        // Going back is only allowed when the next upstream event starts a new run.
        let input = cat(&[A, ADDED, B]);
        let output = cat(&[A, ADDED, START, end0.as_bytes(), B]);
        let err = check(&input, &output, 1 << 20).expect_err("no new run");
        assert!(err.contains("starts no new run"), "{err}");
        let input = cat(&[A, ADDED]);
        let output = cat(&[A, ADDED, START, end0.as_bytes()]);
        let err = check(&input, &output, 1 << 20).expect_err("nothing after");
        assert!(err.contains("no upstream event starts a new run"), "{err}");
    }

    #[test]
    fn payload_profiles_open_and_close_once() {
        let input = cat(&[A, ADDED, B]);
        let ev = |json: &str| format!("data: {json}\n\n").into_bytes();
        let start = ev(
            r#"{"type":"tool_start","sequence_number":2,"tool_call_id":"c","tool_name":"n","args":{}}"#,
        );
        let end = ev(
            r#"{"type":"tool_end","sequence_number":4,"tool_call_id":"c","tool_name":"n","status":"success"}"#,
        );
        let end3 = ev(
            r#"{"type":"tool_end","sequence_number":3,"tool_call_id":"c","tool_name":"n","status":"success"}"#,
        );
        let ok = cat(&[A, ADDED, &start, B3, &end]);
        assert!(check(&input, &ok, 1 << 20).is_ok());
        let twice = cat(&[
            A,
            ADDED,
            &start,
            &end3,
            b"data: {\"type\":\"b\",\"sequence_number\":4}\n\n",
        ]);
        let err = check(&input, &cat(&[&twice, &end]), 1 << 20).expect_err("closed twice");
        assert!(
            err.contains("after it was closed") || err.contains("neither"),
            "{err}"
        );
        let stage = ev(
            r#"{"type":"tool.stage","sequence_number":2,"stage":"running","id":"c","name":"n","parameters":""}"#,
        );
        let err = check(&input, &cat(&[A, ADDED, &stage, B3]), 1 << 20).expect_err("no start");
        assert!(err.contains("without its opening event"), "{err}");
    }
}
