//! The injected events match their published JSON Schemas (`docs/schemas/<type>.schema.json`).
//!
//! Every input stream under `tests/fixtures/` (the hand-made `*.sse`, without the expected
//! `*.out.sse`, and the recordings), plus one synthetic stream with the outputs the fixtures lack,
//! is rewritten with each profile alone and with all four, under its own config (the `*.toml`
//! beside it, else the defaults), the profile goldens' `profiles.toml`, a config with `[[tools]]`
//! templates (so `display`, `resultCount`, `output`, … appear) and one with tight `[sanitize]`
//! limits (so `[REDACTED]`, cut strings and `truncated: true` appear); once in one chunk and once
//! event by event with heartbeats between events. Each event of the output that is not an
//! upstream event (told apart by walking the input alongside) must have a schema and match it,
//! and be framed as its profile's seed says. Across all runs every schema must be used, and the
//! shapes the schemas tell apart (each stage, success and failure, each optional field, each
//! failure kind) must all have been seen, so none is dead.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use jsonschema::Validator;
use serde_json::{Value, json};
use toolpulse::core::profiles::Profile;
use toolpulse::core::sse::{Item, Parser};
use toolpulse::features::progress::Progress;
use toolpulse::{Config, Rewriter};

/// Templates for every tool name in the fixtures, failure patterns with kinds.
const TEMPLATES: &str = r#"
[[tools]]
match = ["github_*", "jira_*"]
kind = "mcp"
display = "Searching GitHub for “{query}”…"
summary = "{tool} found {count} items for “{query}”"
count = "/total_count"

[[tools]]
match = ["web_search", "web_search_preview"]
kind = "web_search"
display = "Searching the web for “{query}”…"
summary = "Searched the web for “{query}”"

[[tools]]
match = ["file_search"]
kind = "file_search"
display = "Searching files for “{query}”…"
summary = "Found {count} files for “{query}”"

[[tools]]
match = ["get_weather", "lookup_user", "web_search_exa", "demo-*"]
kind = "mcp"
display = "Looking up {id}…"

[[tools]]
match = ["parallel", "get_code_context_exa"]
kind = "file_search"
summary = "{tool}: {count} results"

[failure]
output_patterns = ["^no executor found for tool ", "^search failed: ", "(?i)error"]

[failure.kinds]
"^no executor found for tool " = "tool_not_found"
"^search failed: " = "upstream_error"
"#;

/// The sanitizer at its tightest: short strings, a small payload cap, `query` counted secret.
const TIGHT: &str = r#"
[sanitize]
redact_keys = ["*query*", "*key*", "authorization"]
max_string_bytes = 8
max_payload_bytes = 24
"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The schemas, by the event type their file is named after.
fn schemas() -> BTreeMap<String, (Value, Validator)> {
    let dir = root().join("docs/schemas");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(event_type) = file.as_deref().and_then(|f| f.strip_suffix(".schema.json")) else {
            panic!(
                "{}: docs/schemas holds only <type>.schema.json files",
                path.display()
            );
        };
        let schema: Value = serde_json::from_slice(&read(&path))
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
        if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
            panic!("{}: not a valid draft 2020-12 schema: {e}", path.display());
        }
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema",
            "{}",
            path.display()
        );
        assert_eq!(
            schema["properties"]["type"]["const"],
            event_type,
            "{}: `type` must be the const its file is named after",
            path.display()
        );
        assert_eq!(
            schema["additionalProperties"],
            false,
            "{}: a renamed field must be caught",
            path.display()
        );
        let validator = jsonschema::draft202012::new(&schema)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.insert(event_type.to_owned(), (schema, validator));
    }
    out
}

/// A stream with what the fixtures lack: an empty result (so `tool_call_end` leaves `output`
/// out), an output item with `status: "failed"` and one with an `error`.
const SYNTHETIC: &str = "synthetic: empty, failed and error outputs";

fn synthetic() -> Vec<u8> {
    let call = |n: u32, name: &str| {
        json!({"id": format!("fc_{n}"), "type": "function_call", "status": "in_progress",
               "name": name, "call_id": format!("call_{n}"), "arguments": ""})
    };
    let done = |n: u32, name: &str, arguments: &str| {
        json!({"id": format!("fc_{n}"), "type": "function_call", "status": "completed",
               "name": name, "call_id": format!("call_{n}"), "arguments": arguments})
    };
    let output = |n: u32, output: &str, status: &str, error: Value| {
        json!({"id": format!("fco_{n}"), "type": "function_call_output", "call_id": format!("call_{n}"),
               "output": output, "status": status, "error": error})
    };
    let response =
        json!({"id": "resp_s", "object": "response", "status": "in_progress", "output": []});
    let boom = json!({"message": "boom: the tool crashed", "code": "tool_crash"});
    let events = [
        ("response.created", json!({"response": response})),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": call(1, "web_search")}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": done(1, "web_search", r#"{"query":"nothing at all"}"#)}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 1, "item": output(1, "[]", "completed", Value::Null)}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 2, "item": call(2, "file_search")}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 2, "item": done(2, "file_search", r#"{"query":"x"}"#)}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 3, "item": output(2, "partial", "incomplete", Value::Null)}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 4, "item": call(3, "github_get_issue")}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 4, "item": done(3, "github_get_issue", r#"{"repo":"a/b","number":7}"#)}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 5, "item": output(3, "", "completed", boom)}),
        ),
        (
            "response.completed",
            json!({"response": {"id": "resp_s", "status": "completed"}}),
        ),
    ];
    let mut out = String::new();
    for (n, (event_type, fields)) in events.into_iter().enumerate() {
        let mut data = json!({"type": event_type, "sequence_number": n});
        if let (Value::Object(data), Value::Object(fields)) = (&mut data, fields) {
            data.extend(fields);
        }
        out.push_str(&format!("event: {event_type}\ndata: {data}\n\n"));
    }
    out.into_bytes()
}

/// Input streams, relative to `tests/fixtures`.
fn inputs() -> Vec<String> {
    let mut names = common::all_inputs();
    assert!(names.len() > 10, "fixtures found: {names:?}");
    names.push(SYNTHETIC.into());
    names
}

/// The configs to rewrite `input` under, with a label each.
fn configs(input: &str) -> Vec<(String, Config)> {
    let fixtures = root().join("tests/fixtures");
    let own = fixtures.join(input.replace(".sse", ".toml"));
    let mut out = Vec::new();
    if own.exists() {
        let text = String::from_utf8(read(&own)).expect("UTF-8 config");
        let config =
            Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{}: {e}", own.display()));
        out.push((own.display().to_string(), config));
    } else {
        out.push(("defaults".into(), Config::default()));
    }
    let mut shared = vec!["profiles.toml"]; // the profile goldens' config, when there is one
    if input.starts_with("recordings/") {
        shared.extend(["recorded_mcp.toml", "recorded_search.toml"]);
    }
    for name in shared {
        if fixtures.join(name).exists() {
            let text = String::from_utf8(read(&fixtures.join(name))).expect("UTF-8 config");
            let config = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            out.push((name.into(), config));
        }
    }
    for (label, text) in [
        ("templates", TEMPLATES.to_owned()),
        ("templates+tight", format!("{TEMPLATES}{TIGHT}")),
    ] {
        let config = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{label}: {e}"));
        out.push((label.into(), config));
    }
    out
}

fn parse(bytes: &[u8]) -> Vec<Item> {
    let mut parser = Parser::new(usize::MAX);
    parser.push(bytes);
    parser.finish();
    std::iter::from_fn(|| parser.next_item()).collect()
}

/// An event's data as JSON without its `sequence_number` and `output_index` and without the
/// companion items listed in its `response.output` (what the rewriter changes in an upstream
/// event), or its raw bytes when it has no JSON data.
#[derive(Debug, PartialEq)]
enum Content {
    Json(Value),
    Raw(Bytes),
}

fn content(item: &Item) -> Content {
    match item {
        Item::Event(event) => {
            let json = event
                .data()
                .and_then(|d| serde_json::from_slice::<Value>(&d).ok());
            match json {
                Some(Value::Object(mut map)) => {
                    map.remove("sequence_number");
                    map.remove("output_index");
                    let listed = map.get_mut("response").and_then(|r| r.get_mut("output"));
                    if let Some(Value::Array(items)) = listed {
                        items.retain(|i| !i["id"].as_str().is_some_and(|id| id.starts_with("tp_")));
                    }
                    Content::Json(Value::Object(map))
                }
                Some(other) => Content::Json(other),
                None => Content::Raw(event.raw().clone()),
            }
        }
        Item::Oversize(bytes) | Item::Incomplete(bytes) => Content::Raw(bytes.clone()),
    }
}

/// The upstream's events split at their blank lines (LF or CRLF), for feeding one by one.
fn event_chunks(input: &[u8]) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < input.len() {
        let end = [&b"\r\n\r\n"[..], b"\n\n"]
            .iter()
            .find(|sep| input[i..].starts_with(sep))
            .map(|sep| i + sep.len());
        match end {
            Some(end) => {
                chunks.push(&input[start..end]);
                start = end;
                i = end;
            }
            None => i += 1,
        }
    }
    if start < input.len() {
        chunks.push(&input[start..]);
    }
    chunks
}

const HEARTBEAT_STEP: Duration = Duration::from_secs(11);

fn rewrite(config: &Arc<Config>, profiles: &[Profile], input: &[u8], by_event: bool) -> Vec<u8> {
    let start = Instant::now();
    // A fixed wall clock: 2025-12-20T12:34:56.123Z, as in the tool lifecycle contract's example.
    let wall = SystemTime::UNIX_EPOCH + Duration::from_millis(1_766_234_096_123);
    let mut rewriter = Rewriter::new(config.settings())
        .with_profiles(profiles.to_vec())
        .with_wall_clock(wall, start);
    let mut out = Vec::new();
    let mut now = start;
    if by_event {
        for chunk in event_chunks(input) {
            out.extend_from_slice(&rewriter.feed(chunk, now));
            // A call that starts running reports progress (out of band): with and without a
            // total and a message, paced.
            if let Some(call_id) = running_call(chunk) {
                for (n, total, message) in [(1.0, None, None), (2.0, Some(4.0), Some("step 2/4"))] {
                    let report = Progress {
                        progress: n,
                        total,
                        message: message.map(String::from),
                    };
                    out.extend_from_slice(&rewriter.progress(&call_id, report, now));
                    now += Duration::from_millis(150);
                }
            }
            // The upstream is quiet for a while: heartbeats (and `running` stages) are due.
            now += HEARTBEAT_STEP;
            out.extend_from_slice(&rewriter.on_idle(now));
            now += Duration::from_millis(7);
        }
    } else {
        out.extend_from_slice(&rewriter.feed(input, now));
        now += Duration::from_millis(1234);
    }
    out.extend_from_slice(&rewriter.finish(now));
    out
}

/// The call id of a `function_call` whose `output_item.done` is in `chunk`.
fn running_call(chunk: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(chunk).ok()?;
    let data = text.lines().find_map(|l| l.strip_prefix("data: "))?;
    let json: Value = serde_json::from_str(data).ok()?;
    let item = &json["item"];
    let done = json["type"] == "response.output_item.done" && item["type"] == "function_call";
    done.then(|| item["call_id"].as_str().map(String::from))
        .flatten()
}

/// What the run saw, for the coverage checks.
#[derive(Default)]
struct Seen {
    /// Event types validated.
    types: BTreeSet<String>,
    /// Shapes within types: `tool.stage:end:success=false`, `tool_start+display`, ….
    shapes: BTreeSet<String>,
    /// One valid instance per type, for the rename check.
    samples: BTreeMap<String, Value>,
    events: usize,
}

fn note_shapes(seen: &mut Seen, event_type: &str, value: &Value) {
    let mut add = |s: String| {
        seen.shapes.insert(s);
    };
    let has = |k: &str| value.get(k).is_some();
    match event_type {
        "tool.stage" => {
            let stage = value["stage"].as_str().unwrap_or("?");
            add(format!("tool.stage:{stage}"));
            if stage == "end" {
                add(format!("tool.stage:end:success={}", value["success"]));
            }
            if stage == "running" && value["elapsed_ms"].as_u64().is_some_and(|ms| ms > 0) {
                add("tool.stage:running:elapsed>0".into());
            }
            if stage == "running" && has("progress") {
                add(format!(
                    "tool.stage:running:progress{}",
                    if has("total") { "+total" } else { "" }
                ));
            }
        }
        "tool_call_end" => {
            for k in ["resultCount", "output"] {
                add(format!(
                    "tool_call_end{}{k}",
                    if has(k) { "+" } else { "-" }
                ));
            }
        }
        "tool_start" | "tool_end" | "tool_error" => {
            add(format!(
                "{event_type}{}display",
                if has("display") { "+" } else { "-" }
            ));
            if event_type == "tool_error" {
                let kind = value["error"]["kind"].as_str().unwrap_or("?");
                add(format!("tool_error:kind={kind}"));
            }
        }
        "response.output_item.done" => {
            let item = &value["item"];
            let (kind, status) = (item["type"].as_str(), item["status"].as_str());
            add(format!(
                "{event_type}:{}:{}",
                kind.unwrap_or("?"),
                status.unwrap_or("?")
            ));
        }
        t if t.starts_with("response.") && t.ends_with(".completed") => {
            add(format!("{t}:{}", value["outcome"].as_str().unwrap_or("?")));
        }
        _ => {}
    }
    let text = value.to_string();
    if text.contains("[REDACTED]") {
        add(format!("{event_type}:redacted"));
    }
    if text.contains("\"truncated\":true") {
        add(format!("{event_type}:truncated"));
    }
    if value.get("sequence_number").is_some() {
        add("numbered".into());
    } else {
        add("unnumbered".into());
    }
}

/// Checks one rewritten stream; returns a description of every problem.
fn check(
    label: &str,
    input: &[u8],
    output: &[u8],
    schemas: &BTreeMap<String, (Value, Validator)>,
    seen: &mut Seen,
) -> Vec<String> {
    let mut problems = Vec::new();
    // The input as toolpulse mends it (docs/stream-rules.md).
    let input = &invariants::mended_input(input, usize::MAX);
    let upstream_items = parse(input);
    let upstream: Vec<Content> = upstream_items.iter().map(content).collect();
    let input_numbered = upstream_items.iter().any(numbered);
    let mut next = 0;
    let mut numbered_so_far = false;
    for item in parse(output) {
        let c = content(&item);
        if upstream.get(next) == Some(&c) {
            next += 1;
            numbered_so_far |= numbered(&item);
            continue;
        }
        // Not the next upstream event: injected.
        let Item::Event(event) = &item else {
            problems.push(format!("{label}: unexpected non-event item {item:?}"));
            continue;
        };
        if event.data().is_none() {
            if event.raw().as_ref() != b": keep-alive\n\n" {
                problems.push(format!(
                    "{label}: injected block without data: {:?}",
                    event.raw()
                ));
            }
            continue;
        }
        // The whole data this time, `sequence_number` and all.
        let data = event.data().unwrap_or_default();
        let Ok(data) = serde_json::from_slice::<Value>(&data) else {
            problems.push(format!(
                "{label}: injected event is not JSON: {:?}",
                event.raw()
            ));
            continue;
        };
        let Some(event_type) = data["type"].as_str() else {
            problems.push(format!(
                "{label}: injected event without a string type: {data}"
            ));
            continue;
        };
        let Some((_, validator)) = schemas.get(event_type) else {
            problems.push(format!(
                "{label}: injected event type {event_type:?} has no schema in docs/schemas: {data}"
            ));
            continue;
        };
        let errors: Vec<String> = validator
            .iter_errors(&data)
            .map(|e| format!("{} {e}", e.instance_path()))
            .collect();
        if !errors.is_empty() {
            problems.push(format!(
                "{label}: {event_type} does not match its schema: {errors:?}\n  {data}"
            ));
            continue;
        }
        // Framing: the openai profile's events have an `event:` line naming the type; the other
        // profiles' are data-only, as in their seeds.
        let want_line = event_type.starts_with("response.");
        match (want_line, event.event_type()) {
            (true, Some(line)) if line == event_type.as_bytes() => {}
            (false, None) => {}
            (_, line) => problems.push(format!(
                "{label}: {event_type}: event line {:?}, want {}",
                line.map(String::from_utf8_lossy),
                if want_line { "the type" } else { "none" }
            )),
        }
        // Numbered exactly when the upstream numbers its events (once it has shown a number).
        let has_number = data.get("sequence_number").is_some();
        if !input_numbered && has_number || input_numbered && numbered_so_far && !has_number {
            problems.push(format!("{label}: {event_type}: sequence_number {has_number}, upstream numbered {input_numbered}"));
        }
        numbered_so_far |= has_number;
        seen.types.insert(event_type.to_owned());
        seen.samples
            .entry(event_type.to_owned())
            .or_insert_with(|| data.clone());
        seen.events += 1;
        note_shapes(seen, event_type, &data);
    }
    if next != upstream.len() {
        problems.push(format!(
            "{label}: could not find upstream event {next} of {} in the output in order",
            upstream.len()
        ));
    }
    problems
}

fn numbered(item: &Item) -> bool {
    let Item::Event(event) = item else {
        return false;
    };
    event
        .data()
        .and_then(|d| serde_json::from_slice::<Value>(&d).ok())
        .is_some_and(|v| v.get("sequence_number").is_some_and(Value::is_u64))
}

#[test]
fn injected_events_match_their_schemas() {
    let schemas = schemas();
    let mut seen = Seen::default();
    let mut problems = Vec::new();
    // `hosted` drops upstream events, which this walk (upstream events found in order) does not
    // allow: its output is held to the hosted oracle (`invariants::hosted`, the fixture goldens)
    // and to openai-python's strict types in sdk-tests instead; schemas of its own are to come.
    let checked = Profile::ALL.iter().filter(|p| **p != Profile::Hosted);
    let mut profile_sets: Vec<Vec<Profile>> = checked.clone().map(|p| vec![*p]).collect();
    // Every profile at once, but one OpenAI shape: they cannot go together.
    let all = checked.filter(|p| **p != Profile::OpenAiInline);
    profile_sets.push(all.copied().collect());
    for input_name in inputs() {
        let input = if input_name == SYNTHETIC {
            synthetic()
        } else {
            read(&root().join("tests/fixtures").join(&input_name))
        };
        for (config_label, config) in configs(&input_name) {
            let config = Arc::new(config);
            for profiles in &profile_sets {
                for by_event in [false, true] {
                    let names: Vec<&str> = profiles.iter().map(|p| p.name()).collect();
                    let label = format!(
                        "{input_name} [{config_label}] profiles={} {}",
                        names.join(","),
                        if by_event { "event by event" } else { "whole" }
                    );
                    let output = rewrite(&config, profiles, &input, by_event);
                    problems.extend(check(&label, &input, &output, &schemas, &mut seen));
                }
            }
        }
    }
    let shown: Vec<String> = problems
        .iter()
        .take(20)
        .map(|p| match p.char_indices().nth(1500) {
            Some((cut, _)) => format!("{}…", &p[..cut]),
            None => p.clone(),
        })
        .collect();
    assert!(
        problems.is_empty(),
        "{} problems, the first:\n{shown:#?}",
        problems.len()
    );

    let unused: Vec<&String> = schemas
        .keys()
        .filter(|t| !seen.types.contains(*t))
        .collect();
    assert!(
        unused.is_empty(),
        "schemas no fixture exercised: {unused:?}"
    );

    let mut wanted: Vec<String> = [
        "tool.stage:start",
        "tool.stage:streaming",
        "tool.stage:running",
        "tool.stage:running:elapsed>0",
        "tool.stage:running:progress",
        "tool.stage:running:progress+total",
        "tool.stage:end",
        "tool.stage:end:success=true",
        "tool.stage:end:success=false",
        "tool_call_end+resultCount",
        "tool_call_end-resultCount",
        "tool_call_end+output",
        "tool_call_end-output",
        "response.web_search_call.completed:completed",
        "response.web_search_call.completed:failed",
        "response.file_search_call.completed:completed",
        "response.mcp_call.completed:completed",
        "response.output_item.done:mcp_call:completed",
        "response.output_item.done:mcp_call:failed",
        "response.output_item.done:web_search_call:failed",
        "tool.stage:redacted",
        "tool_call_start:redacted",
        "tool_start:redacted",
        "tool_call_end:truncated",
        "tool_end:truncated",
        "tool_error:kind=no_output",
        "tool_error:kind=status_incomplete",
        "tool_error:kind=error",
        "tool_error:kind=tool_not_found",
        "numbered",
        "unnumbered",
    ]
    .map(String::from)
    .to_vec();
    for t in ["tool_start", "tool_end", "tool_error"] {
        wanted.push(format!("{t}+display"));
        wanted.push(format!("{t}-display"));
    }
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|s| !seen.shapes.contains(*s))
        .collect();
    assert!(
        missing.is_empty(),
        "shapes no fixture produced: {missing:?}\nseen: {:?}",
        seen.shapes
    );
    assert!(
        seen.events > 1000,
        "only {} injected events checked",
        seen.events
    );

    // The schemas are strict: renaming any field of a valid event makes it invalid.
    for (event_type, sample) in &seen.samples {
        let (_, validator) = &schemas[event_type];
        let Value::Object(map) = sample else {
            unreachable!("events are objects")
        };
        for key in map.keys().filter(|k| *k != "type") {
            let mut renamed = map.clone();
            let value = renamed.remove(key).unwrap_or_default();
            renamed.insert(format!("{key}_renamed"), value);
            assert!(
                !validator.is_valid(&Value::Object(renamed)),
                "{event_type}: renaming {key:?} went unnoticed"
            );
        }
        // And no openai-profile event may carry a top-level `error` (openai-python raises on it).
        if event_type.starts_with("response.") {
            let mut with_error = map.clone();
            with_error.insert("error".into(), Value::from("x"));
            assert!(
                !validator.is_valid(&Value::Object(with_error)),
                "{event_type} accepts `error`"
            );
        }
    }
}

/// The seeds' own examples match; near misses of the contracts do not.
#[test]
fn seed_examples_pass_and_near_misses_fail() {
    let schemas = schemas();
    let valid = |v: &Value| {
        let t = v["type"].as_str().expect("type");
        schemas[t].1.is_valid(v)
    };
    let seed_examples = [
        // Seed 003.
        json!({"type":"tool_call_start","toolCallId":"tc_abc123","toolName":"semanticSearch","input":{"query":"melancholic love songs","limit":10}}),
        json!({"type":"tool_call_end","toolCallId":"tc_abc123","summary":"Found 8 tracks matching 'melancholic love songs'","resultCount":8,"durationMs":1234,"output":{"tracks":[],"query":"melancholic love songs","totalFound":8}}),
        json!({"type":"tool_call_end","toolCallId":"tc_abc123","summary":"No tracks found matching 'obscure query'","resultCount":0,"durationMs":876}),
        json!({"type":"tool_call_error","toolCallId":"tc_abc123","error":"Vector search service is temporarily unavailable","retryable":false,"wasRetried":true}),
        json!({"type":"tool_call_error","toolCallId":"tc_def456","error":"Query cannot be empty","retryable":false,"wasRetried":false}),
        // Seed 004.
        json!({"type":"tool_start","tool_call_id":"c1","tool_name":"alert_admin","display":"Escalating to an admin for help…","args":{"issue_description":"..."},"ts":"2025-12-20T12:34:56.123Z"}),
        json!({"type":"tool_end","tool_call_id":"c1","tool_name":"alert_admin","display":"Escalating to an admin for help…","status":"success","duration_ms":1234,"result":{"status":"success","message":"..."},"ts":"2025-12-20T12:34:57.357Z"}),
        json!({"type":"tool_error","tool_call_id":"c1","tool_name":"alert_admin","display":"Escalating to an admin for help…","status":"error","duration_ms":1234,"error":{"message":"...","kind":"ExceptionType"},"ts":"2025-12-20T12:34:57.357Z"}),
        // Seed 001's stage table.
        json!({"type":"tool.stage","stage":"start","id":"t1","name":"grep","parameters":""}),
        json!({"type":"tool.stage","stage":"streaming","id":"t1","name":"grep","parameters":"{\"q\":","parametersChunk":"{\"q\":"}),
        json!({"type":"tool.stage","stage":"running","id":"t1","name":"grep","parameters":"{\"q\":1}","elapsed_ms":0}),
        json!({"type":"tool.stage","stage":"end","id":"t1","name":"grep","parameters":"{\"q\":1}","success":true,"result":"3 matches"}),
        json!({"type":"tool.stage","stage":"end","id":"t1","name":"grep","parameters":"{\"q\":1}","success":false,"error":"boom"}),
        // The guarantees of docs/profiles.md.
        json!({"type":"response.mcp_call.in_progress","sequence_number":10,"item_id":"fc_1","output_index":1,"name":"github_get_issue"}),
        json!({"type":"response.web_search_call.completed","sequence_number":12,"item_id":"fc_1","output_index":1,"name":"web_search","outcome":"failed","duration_ms":5}),
    ];
    for example in &seed_examples {
        assert!(
            valid(example),
            "a contract's own example is rejected: {example}"
        );
    }
    let stage = |extra: Value| {
        let mut v = json!({"type":"tool.stage","id":"t1","name":"grep","parameters":""});
        if let (Value::Object(v), Value::Object(extra)) = (&mut v, extra) {
            v.extend(extra);
        }
        v
    };
    let near_misses = [
        stage(json!({"stage":"start","parametersChunk":"x"})),
        stage(json!({"stage":"streaming"})),
        stage(json!({"stage":"running"})),
        stage(json!({"stage":"running","elapsed_ms":-1})),
        stage(json!({"stage":"end"})),
        stage(json!({"stage":"end","success":false})),
        stage(json!({"stage":"end","success":false,"error":"x","result":"y"})),
        stage(json!({"stage":"end","success":true,"result":"y","error":"x"})),
        stage(json!({"stage":"end","success":true})),
        stage(json!({"stage":"running","elapsed_ms":0,"isRunning":true})),
        stage(json!({"stage":"done"})),
        stage(json!({"stage":"start","sequence_number":-1})),
        json!({"type":"tool.stage","stage":"start","id":"t1","name":"grep"}),
        json!({"type":"tool_call_start","toolCallId":"c","toolName":"t"}),
        json!({"type":"tool_call_start","tool_call_id":"c","toolName":"t","input":{}}),
        json!({"type":"tool_call_end","toolCallId":"c","summary":"s","durationMs":1,"output":null}),
        json!({"type":"tool_call_end","toolCallId":"c","summary":"s","durationMs":1,"output":[]}),
        json!({"type":"tool_call_end","toolCallId":"c","summary":"s","durationMs":1.5}),
        json!({"type":"tool_call_end","toolCallId":"c","summary":"s","resultCount":-1,"durationMs":1}),
        json!({"type":"tool_call_error","toolCallId":"c","error":{"message":"x"},"retryable":false,"wasRetried":false}),
        json!({"type":"tool_call_error","toolCallId":"c","error":"x","retryable":false}),
        json!({"type":"tool_start","tool_call_id":"c","tool_name":"t","args":{}}),
        json!({"type":"tool_start","tool_call_id":"c","tool_name":"t","args":{},"ts":"2025-12-20 12:34:56"}),
        json!({"type":"tool_start","tool_call_id":"c","tool_name":"t","args":{},"ts":"2025-12-20T12:34:56Z"}),
        json!({"type":"tool_end","tool_call_id":"c","tool_name":"t","status":"ok","duration_ms":1,"result":1,"ts":"2025-12-20T12:34:56.123Z"}),
        json!({"type":"tool_end","tool_call_id":"c","tool_name":"t","status":"success","duration_ms":1,"ts":"2025-12-20T12:34:56.123Z"}),
        json!({"type":"tool_error","tool_call_id":"c","tool_name":"t","status":"error","duration_ms":1,"error":{"message":"x"},"ts":"2025-12-20T12:34:56.123Z"}),
        json!({"type":"tool_error","tool_call_id":"c","tool_name":"t","status":"error","duration_ms":1,"error":"x","ts":"2025-12-20T12:34:56.123Z"}),
        json!({"type":"tool_error","tool_call_id":"c","tool_name":"t","status":"error","duration_ms":1,"error":{"message":"x","kind":"k","stack":"s"},"ts":"2025-12-20T12:34:56.123Z"}),
        json!({"type":"response.mcp_call.in_progress","item_id":"fc_1","name":"n"}),
        json!({"type":"response.mcp_call.in_progress","item_id":"fc_1","output_index":1,"name":"n","error":null}),
        json!({"type":"response.mcp_call.completed","item_id":"fc_1","output_index":1,"name":"n","outcome":"failed","duration_ms":1}),
        json!({"type":"response.mcp_call.failed","item_id":"fc_1","output_index":1,"name":"n","outcome":"completed","duration_ms":1}),
        json!({"type":"response.mcp_call.failed","item_id":"fc_1","output_index":1,"name":"n","outcome":"failed"}),
        json!({"type":"response.file_search_call.completed","item_id":"fc_1","output_index":1,"name":"n","outcome":"error","duration_ms":1}),
        json!({"type":"response.web_search_call.searching","item_id":"fc_1","output_index":1,"name":"n","duration_ms":1}),
    ];
    for example in &near_misses {
        assert!(!valid(example), "a schema accepts a near miss: {example}");
    }
}
