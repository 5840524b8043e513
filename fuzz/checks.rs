//! The fuzz targets' oracles, in plain Rust (no libfuzzer), so `tests/it/fuzz_corpus.rs` replays
//! the corpus through them on stable. Each check panics when a property fails.
//!
//! - [`parser`]: the SSE parser loses, adds and reorders no byte; its items do not depend on how
//!   the input is split; an event within the size limit parses exactly as without a limit; and at
//!   most `max_event_bytes + 1` bytes stay buffered between pushes.
//! - [`rewriter`]: the rewriter's output keeps the stream's guarantees (docs/profiles.md, docs/stream-rules.md) as judged by
//!   [`invariants::check`] (fail-open, no byte lost or reordered, dense renumbering
//!   where the input was dense, every opening closed exactly once, untouched when nothing is
//!   injected), and does not depend on how the input is split; with time passing between
//!   chunks (heartbeats, `stages`' running events) it still keeps the invariants.
//! - [`ag_ui`]: the rewriter's inputs through the AG-UI translator instead: its output is a
//!   valid AG-UI run as [`invariants::ag_ui::check`] judges it (run started first and ended
//!   once, every tool call ended once, results after their ends, one final status per activity,
//!   no Responses dialect), the same however the input is split, also with time passing
//!   (heartbeats) and a progress report for every call id the input names.
//! - [`h1`]: toolpulse's own HTTP/1.1 response reading (`http1::client`) gives the same
//!   outcome however the bytes are split, and whatever it accepts, hyper's HTTP/1 client
//!   accepts with the same status, header fields and body; it refuses what hyper accepts only
//!   where it is stricter on purpose ([`STRICTER_THAN_HYPER`]).
//!
//! Inputs start with a few control bytes (limits, how to split, which config); see each check.
//! Arbitrary bytes rarely look like a Responses stream, so the rewriter check can also read its
//! input as opcodes that render an agentic stream ([`render`]).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use toolpulse::core::profiles::Profile;
use toolpulse::core::sse::{Item, Parser};
use toolpulse::http1::client::{self, HeadError, Parsed};
use toolpulse::http1::decode::{DecodeError, Decoder};
use toolpulse::http1::head::MAX_HEAD_BYTES;
use toolpulse::{Config, Rewriter};

/// `data` = `[limit, max_chunk, seed, input…]`: parses `input` with `max_event_bytes` =
/// `limit + 1` (1..=256, so oversize events are common), whole and in chunks cut by
/// [`chunks`], and with no limit.
pub fn parser(data: &[u8]) {
    let [limit, max_chunk, seed, input @ ..] = data else {
        return;
    };
    let max = usize::from(*limit) + 1;
    let whole = parse(max, &[input]);
    let split = parse(max, &chunks(input, *max_chunk, *seed));
    assert!(
        bytes_of(&whole) == input,
        "whole: bytes lost, added or moved"
    );
    assert!(
        bytes_of(&split) == input,
        "split: bytes lost, added or moved"
    );
    // Oversize pieces are cut where the chunks end; what they hold, and every other item, is
    // the same however the input was split.
    assert_eq!(
        merged(whole.clone()),
        merged(split),
        "items depend on the split"
    );
    let unlimited: HashMap<usize, Item> = with_offsets(parse(usize::MAX, &[input])).collect();
    for (offset, item) in with_offsets(whole) {
        if let Item::Event(event) = &item {
            assert!(
                event.raw().len() <= max,
                "an event over the limit at {offset}"
            );
            assert_eq!(
                unlimited.get(&offset),
                Some(&item),
                "the event at {offset} parses differently without a limit"
            );
        }
    }
}

fn parse(max: usize, chunks: &[&[u8]]) -> Vec<Item> {
    let mut parser = Parser::new(max);
    let mut items = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        items.extend(std::iter::from_fn(|| parser.next_item()));
        // Bounded memory: a full event, plus a trailing CR held until the next byte.
        assert!(
            parser.buffered_bytes() <= max.saturating_add(1),
            "memory over the bound"
        );
    }
    parser.finish();
    items.extend(std::iter::from_fn(|| parser.next_item()));
    assert_eq!(
        parser.buffered_bytes(),
        0,
        "bytes left in the parser at EOF"
    );
    items
}

fn item_bytes(item: &Item) -> &[u8] {
    match item {
        Item::Event(e) => e.raw(),
        Item::Oversize(b) | Item::Incomplete(b) => b,
    }
}

fn bytes_of(items: &[Item]) -> Vec<u8> {
    items.iter().flat_map(item_bytes).copied().collect()
}

/// The items with each run of adjacent oversize pieces joined into one.
fn merged(items: Vec<Item>) -> Vec<Item> {
    let mut out: Vec<Item> = Vec::new();
    for item in items {
        match (out.last_mut(), item) {
            (Some(Item::Oversize(prev)), Item::Oversize(next)) => {
                *prev = [&prev[..], &next[..]].concat().into();
            }
            (_, item) => out.push(item),
        }
    }
    out
}

fn with_offsets(items: Vec<Item>) -> impl Iterator<Item = (usize, Item)> {
    let mut offset = 0;
    items.into_iter().map(move |item| {
        let at = offset;
        offset += item_bytes(&item).len();
        (at, item)
    })
}

/// Cuts `input` into chunks of 0..=`max_chunk` + 1 bytes (empty chunks included), their lengths
/// drawn from `seed` by a xorshift, so the same control bytes always split the same way.
pub fn chunks(input: &[u8], max_chunk: u8, seed: u8) -> Vec<&[u8]> {
    let bound = u64::from(max_chunk) + 2;
    let mut state = (u64::from(seed) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = usize::try_from(state % bound).unwrap_or(1).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        out.push(chunk);
        rest = tail;
    }
    out
}

/// `data` = `[flags, max_chunk, seed, input…]`. `flags`: bits 0-1 pick the config ([`configs`]),
/// bits 3-5 the `max_event_bytes` ([`LIMITS`]); bit 2 set renders `input` as opcodes
/// ([`render`], which reads bits 6-7 too) instead of using it as it is.
///
/// The input is rewritten whole and in chunks at one fixed instant (as the golden tests do, so
/// durations agree), and in the same chunks with `step` (from `seed`) passing before up to `MAX_TICKS` of them
/// and an idle tick there, so heartbeats come in between. Returns what the checker counted in
/// the whole run.
pub fn rewriter(data: &[u8]) -> invariants::Report {
    let [flags, max_chunk, seed, rest @ ..] = data else {
        return invariants::Report::default();
    };
    let input = if flags & 4 != 0 {
        render(rest, *flags)
    } else {
        rest.to_vec()
    };
    let (config, profiles) = &configs()[usize::from(flags & 3)][usize::from((flags >> 3) & 7)];
    let max = config.limits.max_event_bytes;
    let start = Instant::now();
    let whole = rewrite(config, profiles, &[&input], start, None);
    let report = holds(&input, &whole, max, "whole");
    let chunks = chunks(&input, *max_chunk, *seed);
    let split = rewrite(config, profiles, &chunks, start, None);
    assert!(split == whole, "the output depends on the split");
    let step = Duration::from_millis(u64::from(*seed) * 50);
    let live = rewrite(config, profiles, &chunks, start, Some(step));
    holds(&input, &live, max, "with time passing");
    report
}

/// `data` as for [`rewriter`], through the AG-UI translator; half the inputs declare
/// `web_search` a tool of the client's (flags bit 7).
pub fn ag_ui(data: &[u8]) -> invariants::ag_ui::Report {
    let [flags, max_chunk, seed, rest @ ..] = data else {
        return invariants::ag_ui::Report::default();
    };
    let input = if flags & 4 != 0 {
        render(rest, *flags)
    } else {
        rest.to_vec()
    };
    let (config, _) = &configs()[usize::from(flags & 3)][usize::from((flags >> 3) & 7)];
    let client = if flags & 128 != 0 {
        vec!["web_search".to_string()]
    } else {
        Vec::new()
    };
    let start = Instant::now();
    let run = |chunks: &[&[u8]], step: Option<Duration>| {
        let settings = config.settings();
        let mut translator =
            toolpulse::core::ag_ui::Translator::new(settings, "t".into(), "r".into())
                .with_client_tools(client.clone());
        let mut out = translator.start().to_vec();
        let mut now = start;
        let every = chunks.len().div_ceil(MAX_TICKS).max(1);
        for (i, chunk) in chunks.iter().enumerate() {
            if let Some(step) = step.filter(|_| i % every == 0) {
                now += step;
                out.extend_from_slice(&translator.on_idle(now));
                for id in ["call_1", "call_2", "c1"] {
                    let report = toolpulse::core::lifecycle::Progress {
                        progress: i as f64,
                        total: Some(f64::NAN),
                        message: Some("step\n\"two\"".into()),
                    };
                    out.extend_from_slice(&translator.progress(id, report, now));
                }
            }
            out.extend_from_slice(&translator.feed(chunk, now));
        }
        out.extend_from_slice(&translator.finish(now));
        out
    };
    let judged = |output: &[u8], run: &str| {
        invariants::ag_ui::check(output).unwrap_or_else(|e| {
            let text = String::from_utf8_lossy(output)
                .chars()
                .take(4000)
                .collect::<String>();
            panic!("{run}: {e}\n--- output ---\n{text}")
        })
    };
    let whole = run(&[&input], None);
    let report = judged(&whole, "whole");
    let chunks = chunks(&input, *max_chunk, *seed);
    assert!(
        run(&chunks, None) == whole,
        "the output depends on the split"
    );
    judged(
        &run(&chunks, Some(Duration::from_millis(u64::from(*seed) * 50))),
        "with time passing",
    );
    report
}

fn holds(input: &[u8], output: &[u8], max: usize, run: &str) -> invariants::Report {
    invariants::check(input, output, max).unwrap_or_else(|e| {
        let show = |b: &[u8]| {
            let text = String::from_utf8_lossy(b);
            text.chars().take(4000).collect::<String>()
        };
        panic!(
            "{run}: {e}\n--- input ---\n{}\n--- output ---\n{}",
            show(input),
            show(output)
        )
    })
}

fn rewrite(
    config: &Arc<Config>,
    profiles: &Option<Vec<Profile>>,
    chunks: &[&[u8]],
    start: Instant,
    step: Option<Duration>,
) -> Vec<u8> {
    // The tests' wall clock (2025-12-20T12:34:56.123Z), for profiles that stamp events.
    let wall = SystemTime::UNIX_EPOCH + Duration::from_millis(1_766_234_096_123);
    let mut rewriter = Rewriter::new(config.settings()).with_wall_clock(wall, start);
    if let Some(profiles) = profiles {
        rewriter = rewriter.with_profiles(profiles.clone());
    }
    let mut now = start;
    let mut out = Vec::new();
    // Time passes before at most `MAX_TICKS` chunks (spread evenly), with an idle tick there:
    // every tick can bring a heartbeat and a running event, and thousands of tiny chunks would
    // make a run that checks nothing new, only slowly.
    let every = chunks.len().div_ceil(MAX_TICKS).max(1);
    for (i, chunk) in chunks.iter().enumerate() {
        if let Some(step) = step.filter(|_| i % every == 0) {
            now += step;
            out.extend_from_slice(&rewriter.on_idle(now));
        }
        out.extend_from_slice(&rewriter.feed(chunk, now));
    }
    if let Some(step) = step {
        now += step;
        out.extend_from_slice(&rewriter.on_idle(now));
    }
    out.extend_from_slice(&rewriter.finish(now));
    out
}

/// How many times time passes in one run with `step`.
const MAX_TICKS: usize = 256;

/// `max_event_bytes` by `(flags >> 3) & 7`: the default (16 MiB), then small limits so that
/// oversize events (forwarded unread) are common.
pub const LIMITS: [usize; 8] = [0, 1, 16, 64, 200, 512, 1024, 4096];

/// The config of the generated and recorded streams: every kind of tool, templates, failure
/// rules and kinds, a short string limit so sanitizing cuts, and a 1 s heartbeat.
const FUZZ_TOML: &str = r#"
[[tools]]
match = ["web_search"]
kind = "web_search"
display = "Searching the web for “{query}”…"
summary = "Found {count} results for “{query}”"
count = "/results"

[[tools]]
match = ["file_search", "parallel"]
kind = "file_search"
display = "Searching files for “{query}”…"
count = "/results"

[[tools]]
match = ["github_*", "jira_*", "get_weather", "lookup_user", "web_search_exa"]
kind = "mcp"
display = "Working on {repo}…"

[[tools]]
match = ["secret_*"]
kind = "ignore"

[failure]
output_patterns = ["^no executor found for tool ", "^search failed: "]

[failure.kinds]
"^search failed: " = "search_failed"
"^no executor found for tool " = "no_executor"

[sanitize]
max_string_bytes = 64
max_payload_bytes = 512

[heartbeat]
interval_ms = 1000
"#;

/// A config and the profiles a request asks for (`None`: the config's own).
type Setup = (Arc<Config>, Option<Vec<Profile>>);

/// The configs by `flags & 3`, each at every limit of [`LIMITS`]:
/// 0. the defaults (built-in classification only, profile `hosted`);
/// 1. [`FUZZ_TOML`] with its default profile, `hosted` (items hidden, indices that move down);
/// 2. [`FUZZ_TOML`] with `openai` (companions) and every other profile, per request
///    (`Rewriter::with_profiles`);
/// 3. [`FUZZ_TOML`] with `stages`, `tool_call` and `tool`, and at most 2 open calls tracked.
fn configs() -> &'static [Vec<Setup>] {
    static CONFIGS: OnceLock<Vec<Vec<Setup>>> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        let fuzz = Config::from_toml_str(FUZZ_TOML).expect("FUZZ_TOML is valid");
        let mut payload = fuzz.clone();
        // The payload profiles with the inline OpenAI shape; every profile with companions.
        payload.events.profiles = vec![
            Profile::OpenAiInline,
            Profile::Stages,
            Profile::ToolCall,
            Profile::Tool,
        ];
        let with = |shape: Profile| -> Vec<Profile> {
            let others = Profile::ALL.into_iter();
            let others = others.filter(|p| !toolpulse::core::profiles::PRESENTATIONS.contains(p));
            std::iter::once(shape).chain(others).collect()
        };
        payload.limits.max_open_calls = 2;
        let bases = [
            (Config::default(), None),
            (fuzz.clone(), None),
            (fuzz, Some(with(Profile::OpenAi))),
            (payload, None),
        ];
        bases
            .into_iter()
            .map(|(config, profiles)| {
                LIMITS
                    .iter()
                    .map(|&limit| {
                        let mut config = config.clone();
                        if limit > 0 {
                            config.limits.max_event_bytes = limit;
                        }
                        (Arc::new(config), profiles.clone())
                    })
                    .collect()
            })
            .collect()
    })
}

/// Tool names by index (mod the length): search built-ins, MCP-style names (by `FUZZ_TOML`), a
/// plain function, an ignored tool, an empty name.
const NAMES: &[&str] = &[
    "web_search",
    "file_search",
    "github_issue",
    "get_weather",
    "plain_function",
    "secret_tool",
    "web_search_preview",
    "jira_create",
    "",
];

/// Renders opcodes as an antwort/OpenAI/LiteLLM-shaped Responses stream (the generator of
/// `tests/it/properties.rs`, widened). Each byte is `op | param << 4`; `Added` and `Done` read one
/// more byte for the tool name. `flags` bit 6 ends the stream with an unterminated event; bit 7
/// starts LiteLLM-style (no `event:` lines, numbers from 5).
///
/// | op | event |
/// |---|---|
/// | 0 | text delta (param picks ASCII, multi-byte UTF-8 or escapes) |
/// | 1 | `output_item.added` of `function_call` item `param % 4` (name byte) |
/// | 2 | `function_call_arguments.delta` |
/// | 3 | `function_call_arguments.done` |
/// | 4 | `output_item.done` of the `function_call` item (name byte) |
/// | 5 | `output_item.added` of a `function_call_output` (param: call, and its text/shape) |
/// | 6 | `output_item.done` of a `function_call_output` |
/// | 7 | terminal: `response.completed` (listing calls 0..=param%4), `failed`/`incomplete`, antwort's nested `error` |
/// | 8 | `data: [DONE]` |
/// | 9 | a comment |
/// | 10 | garbage: non-JSON, invalid UTF-8, empty data, id/retry only, no data, unknown type |
/// | 11 | a native hosted item (`mcp_call`, `web_search_call`), added or done |
/// | 12 | numbering: next event unnumbered, a gap, a new response (`response.created` from 0), numbers on/off |
/// | 13 | framing: LF / CRLF / CR, `event:` lines on/off, next `event:` line lies |
/// | 14 | a big text delta (`param` × 97 bytes), over the small limits |
/// | 15 | the next event's data is split over two `data:` lines (param: before which key) |
pub fn render(ops: &[u8], flags: u8) -> Vec<u8> {
    let litellm = flags & 0x80 != 0;
    let mut r = Render {
        out: Vec::new(),
        seq: if litellm { 5 } else { 0 },
        numbered: true,
        skip_number: false,
        nl: "\n",
        event_lines: !litellm,
        lie: false,
        split_at: None,
    };
    let mut bytes = ops.iter().copied();
    while let Some(b) = bytes.next() {
        let (op, p) = (b & 15, usize::from(b >> 4));
        let c = p % 4;
        match op {
            0 => {
                let delta = ["hi ", "é—🦀", r#"\"q\"\n\u00e9"#, ""][p % 4];
                let rest = format!(r#","item_id":"msg_1","output_index":0,"delta":"{delta}""#);
                r.event("response.output_text.delta", &rest);
            }
            1 | 4 => {
                let name = NAMES[usize::from(bytes.next().unwrap_or(0)) % NAMES.len()];
                let (kind, arguments) = if op == 1 {
                    ("response.output_item.added", "")
                } else {
                    (
                        "response.output_item.done",
                        r#"{\"query\":\"rust sse\",\"repo\":\"toolpulse\",\"api_key\":\"sk-1\"}"#,
                    )
                };
                let status = if op == 1 { "in_progress" } else { "completed" };
                let rest = format!(
                    r#","output_index":{},"item":{{"id":"fc_{c}","type":"function_call","status":"{status}","name":"{name}","call_id":"call_{c}","arguments":"{arguments}"}}"#,
                    c + 1
                );
                r.event(kind, &rest);
            }
            2 => {
                let delta = [r#"{\"query\":"#, r#"\"rust\"}"#, "", r#"\u00e9"#][p / 4];
                let rest = format!(
                    r#","item_id":"fc_{c}","output_index":{},"delta":"{delta}""#,
                    c + 1
                );
                r.event("response.function_call_arguments.delta", &rest);
            }
            3 => {
                let rest = format!(
                    r#","item_id":"fc_{c}","output_index":{},"arguments":"{{\"query\":\"rust\"}}""#,
                    c + 1
                );
                r.event("response.function_call_arguments.done", &rest);
            }
            5 | 6 => {
                let output = [
                    r#""output":"{\"results\":[1,2,3]}","status":"completed""#,
                    r#""output":"search failed: boom","status":"completed""#,
                    r#""output":"no executor found for tool x","status":"completed""#,
                    r#""output":[{"type":"output_text","text":"[1]"}],"status":"failed","error":{"message":"x"}"#,
                ][p / 4];
                let kind = if op == 5 {
                    "response.output_item.added"
                } else {
                    "response.output_item.done"
                };
                let rest = format!(
                    r#","output_index":{},"item":{{"id":"out_{c}","type":"function_call_output","call_id":"call_{c}",{output}}}"#,
                    c + 5
                );
                r.event(kind, &rest);
            }
            7 => match p % 4 {
                // Lists the function_call items 0..=c (and a message) in its output.
                0 => {
                    let calls: Vec<String> = (0..=c)
                        .map(|k| {
                            format!(
                                r#"{{"id":"fc_{k}","type":"function_call","status":"completed","name":"web_search","call_id":"call_{k}","arguments":"{{}}"}}"#
                            )
                        })
                        .collect();
                    let rest = format!(
                        r#","response":{{"id":"resp_1","output":[{},{{"type":"message","id":"msg_1"}}]}}"#,
                        calls.join(",")
                    );
                    r.event("response.completed", &rest)
                }
                1 => r.event("response.failed", r#","response":{"id":"resp_1"}"#),
                2 => r.event("response.incomplete", r#","response":{"id":"resp_1"}"#),
                _ => r.event(
                    "error",
                    r#","error":{"type":"server_error","message":"boom"}"#,
                ),
            },
            8 => r.raw(&["data: [DONE]", ""]),
            9 => r.raw(&[[": keep-alive", ":"][p % 2], ""]),
            10 => match p % 6 {
                0 => r.raw(&["data: {not json", ""]),
                1 => r
                    .out
                    .extend_from_slice(b"data: {\"type\":\"\xff\xfe\"}\n\n"),
                2 => r.raw(&["data:", ""]),
                3 => r.raw(&["id: 7", "retry: 10", ""]),
                4 => r.raw(&["event: response.output_item.done", ""]),
                _ => r.event("response.unknown_thing", r#","x":[1,{"y":null}]"#),
            },
            11 => {
                let kind = ["mcp_call", "web_search_call"][p % 2];
                let event = if p & 2 == 0 {
                    "response.output_item.added"
                } else {
                    "response.output_item.done"
                };
                let rest = format!(
                    r#","output_index":9,"item":{{"id":"native_{c}","type":"{kind}","call_id":"call_{c}","name":"web_search","status":"in_progress"}}"#
                );
                r.event(event, &rest);
            }
            12 => match p % 4 {
                0 => r.skip_number = true,
                1 => r.seq += 1 + p as u64,
                // Another response on the same connection.
                2 => {
                    r.seq = 0;
                    r.event(
                        "response.created",
                        r#","response":{"id":"resp_2","output":[]}"#,
                    );
                }
                _ => r.numbered = !r.numbered,
            },
            13 => match p % 4 {
                0 => r.nl = "\n",
                1 => r.nl = "\r\n",
                2 => r.nl = "\r",
                _ if p < 8 => r.event_lines = !r.event_lines,
                _ => r.lie = true,
            },
            14 => {
                let rest = format!(
                    r#","item_id":"msg_1","output_index":0,"delta":"{}""#,
                    "x".repeat(p * 97)
                );
                r.event("response.output_text.delta", &rest);
            }
            _ => r.split_at = Some(p),
        }
    }
    if flags & 0x40 != 0 {
        r.out
            .extend_from_slice(b"event: response.output_text.delta\ndata: {\"type\":\"resp");
    }
    r.out
}

struct Render {
    out: Vec<u8>,
    seq: u64,
    numbered: bool,
    skip_number: bool,
    nl: &'static str,
    event_lines: bool,
    /// The next `event:` line names another type than its JSON.
    lie: bool,
    split_at: Option<usize>,
}

impl Render {
    /// One event: `event:` line (if on), `data:` JSON with `type`, `sequence_number` (if on)
    /// and `rest`, each line ended by the current line ending.
    fn event(&mut self, kind: &str, rest: &str) {
        let nl = self.nl;
        if self.event_lines {
            let line = if std::mem::take(&mut self.lie) {
                "response.output_text.delta"
            } else {
                kind
            };
            self.out
                .extend_from_slice(format!("event: {line}{nl}").as_bytes());
        }
        let mut number = String::new();
        if self.numbered && !std::mem::take(&mut self.skip_number) {
            number = format!(r#","sequence_number":{}"#, self.seq);
            self.seq += 1;
        }
        let mut json = format!(r#"{{"type":"{kind}"{number}{rest}}}"#);
        if let Some(k) = self.split_at.take() {
            // Before a key (`,"`: inside strings commas are followed by `\"`), or at either end:
            // the joined lines are the same JSON with one more whitespace.
            let mut points = vec![0, json.len()];
            points.extend(json.match_indices(",\"").map(|(i, _)| i + 1));
            let at = points[k % points.len()];
            json.insert_str(at, &format!("{nl}data: "));
        }
        self.out
            .extend_from_slice(format!("data: {json}{nl}{nl}").as_bytes());
    }

    /// Lines as they are, each ended by the current line ending.
    fn raw(&mut self, lines: &[&str]) {
        for line in lines {
            self.out.extend_from_slice(line.as_bytes());
            self.out.extend_from_slice(self.nl.as_bytes());
        }
    }
}

/// Where toolpulse's HTTP/1.1 reading refuses a response that hyper's client accepts, on
/// purpose; any other refusal of a response hyper accepts fails [`h1`].
///
/// - both `Transfer-Encoding` and `Content-Length`: RFC 9112 §6.3 says this "ought to be
///   handled as an error"; hyper follows `Transfer-Encoding`, a proxy must not guess;
/// - `101 Switching Protocols`: toolpulse never asks to upgrade;
/// - a head over `MAX_HEAD_BYTES` (64 KiB): hyper takes up to its read buffer (~400 KiB);
/// - a bare LF in the trailer section: hyper hands the trailer bytes to httparse, which takes
///   a bare LF as a line end, so `0\r\n\nanything\r\n\r\n` ends a body for hyper (the bytes
///   after the LF are dropped unread); toolpulse wants CRLF everywhere in chunked framing.
pub const STRICTER_THAN_HYPER: [H1Refusal; 4] = [
    H1Refusal::Head(HeadError::LengthAndTransferEncoding),
    H1Refusal::Head(HeadError::SwitchingProtocols),
    H1Refusal::Head(HeadError::TooLarge),
    H1Refusal::Body(DecodeError::TrailerBareLf),
];

/// A response as the reader hands it on: what hyper's client gives too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H1Message {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// Why toolpulse refused a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H1Refusal {
    Head(HeadError),
    /// The connection closed before a complete final head.
    HeadCut,
    Body(DecodeError),
}

/// `data` = `[flags, seed, response…]`: bit 0 of `flags` picks the request method (GET or
/// HEAD), its bits 1-7 the largest piece ([`chunks`] with `flags >> 1` and `seed`). The
/// response (head and body, as the upstream sends them, then the connection closes) is read
/// by toolpulse whole and in pieces, and by hyper's client whole. Returns whether toolpulse
/// accepted it.
///
/// The equivalence with hyper: hyper's body is what `collect` gives (data frames; trailers
/// dropped, as toolpulse drops them). Both read no body for HEAD, 204 and 304, both read to
/// the close without `Content-Length` or with a non-chunked `Transfer-Encoding`, and both
/// stop at the body's end, leaving what follows unread; so status, header fields (in order)
/// and body bytes must be equal whenever toolpulse accepts, once hyper's `Content-Length` is
/// made what toolpulse hands on ([`one_length`]).
pub fn h1(data: &[u8]) -> bool {
    let [flags, seed, response @ ..] = data else {
        return false;
    };
    let method = if flags & 1 == 0 {
        http::Method::GET
    } else {
        http::Method::HEAD
    };
    let whole = h1_read(&[response], &method);
    let split = h1_read(&chunks(response, flags >> 1, *seed), &method);
    assert_eq!(whole, split, "the outcome depends on the split");
    let reference = hyper_read(response, &method);
    match (&whole, reference) {
        (Ok(ours), Ok(theirs)) => assert_eq!(ours, &theirs, "toolpulse and hyper read differently"),
        (Ok(ours), Err(e)) => panic!("toolpulse accepts what hyper refuses ({e:?}): {ours:?}"),
        (Err(refusal), Ok(theirs)) => assert!(
            STRICTER_THAN_HYPER.contains(refusal),
            "toolpulse refuses ({refusal:?}) what hyper accepts: {theirs:?}"
        ),
        (Err(_), Err(_)) => {}
    }
    whole.is_ok()
}

/// Reads a response the way the connection code does: bytes arrive in `pieces`, the head is
/// parsed (1xx heads skipped) until complete, then the body is decoded from what follows; the
/// last piece is followed by end of file.
fn h1_read(pieces: &[&[u8]], method: &http::Method) -> Result<H1Message, H1Refusal> {
    let mut pieces = pieces.iter();
    let mut pending: Vec<u8> = Vec::new();
    let head = 'head: loop {
        loop {
            match client::parse(&pending, method).map_err(H1Refusal::Head)? {
                Parsed::Partial => break,
                Parsed::Informational { len } => {
                    pending.drain(..len);
                }
                Parsed::Final { head, len } => {
                    pending.drain(..len);
                    break 'head head;
                }
            }
        }
        // Bounded memory: a head still partial is under the limit.
        assert!(
            pending.len() < MAX_HEAD_BYTES,
            "a partial head over the limit"
        );
        pending.extend_from_slice(pieces.next().ok_or(H1Refusal::HeadCut)?);
    };
    let mut decoder = Decoder::new(head.framing);
    let mut body = Vec::new();
    loop {
        while !decoder.is_done() {
            let step = decoder.decode(&pending).map_err(H1Refusal::Body)?;
            assert!(step.consumed <= pending.len(), "consumed more than given");
            if let Some(range) = step.data.clone() {
                assert!(
                    !range.is_empty() && range.end <= step.consumed,
                    "data {range:?} outside the {} bytes consumed",
                    step.consumed
                );
                body.extend_from_slice(&pending[range]);
            }
            pending.drain(..step.consumed);
            if step.consumed == 0 {
                // Never stuck: the decoder takes something from any non-empty buffer.
                assert!(pending.is_empty(), "no progress on {} bytes", pending.len());
                break;
            }
        }
        if decoder.is_done() {
            break;
        }
        match pieces.next() {
            Some(piece) => pending.extend_from_slice(piece),
            None => {
                decoder.eof().map_err(H1Refusal::Body)?;
                break;
            }
        }
    }
    Ok(H1Message {
        status: head.status,
        headers: head.headers,
        body,
    })
}

thread_local! {
    /// One runtime per thread, reused: building one per input would cost more than the input.
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
}

/// The reference reading: hyper's HTTP/1 client sends a `method` request over a connection
/// whose peer answers `response` and closes.
fn hyper_read(response: &[u8], method: &http::Method) -> Result<H1Message, hyper::Error> {
    RUNTIME.with(|runtime| runtime.block_on(hyper_exchange(response, method.clone())))
}

/// `Content-Length` as toolpulse hands it on: one field with its number (`06, 6` is `6`), or
/// none when the fields give no one length (which only a response without a body keeps).
/// hyper passes the fields on as received; a client's parser may refuse or misread those.
fn one_length(headers: &mut http::HeaderMap) {
    use http::header::CONTENT_LENGTH;
    if !headers.contains_key(CONTENT_LENGTH) {
        return;
    }
    let (mut one, mut valid) = (None, true);
    for value in headers.get_all(CONTENT_LENGTH) {
        let text = value.to_str().unwrap_or(",");
        for element in text.split(',').map(str::trim) {
            let digits = !element.is_empty() && element.bytes().all(|b| b.is_ascii_digit());
            match digits.then(|| element.parse::<u64>().ok()).flatten() {
                Some(n) if one.is_some_and(|o| o != n) => valid = false,
                Some(n) => one = Some(n),
                None => valid = false,
            }
        }
    }
    match one.filter(|n| valid && *n <= u64::MAX - 2) {
        Some(n) => {
            headers.insert(CONTENT_LENGTH, n.into());
        }
        None => {
            headers.remove(CONTENT_LENGTH);
        }
    }
}

async fn hyper_exchange(response: &[u8], method: http::Method) -> Result<H1Message, hyper::Error> {
    use http_body_util::BodyExt;

    let io = Replay {
        rest: response,
        asked: false,
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake::<_, http_body_util::Empty<bytes::Bytes>>(io).await?;
    let request = http::Request::builder()
        .method(method)
        .uri("/")
        .header(http::header::HOST, "upstream")
        .body(http_body_util::Empty::new())
        .expect("a valid request");
    let exchange = async move {
        let (mut parts, body) = sender.send_request(request).await?.into_parts();
        let body = body.collect().await?.to_bytes().to_vec();
        one_length(&mut parts.headers);
        Ok(H1Message {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    };
    // The connection is driven alongside until the exchange ends (it may end first: its
    // errors reach the exchange).
    let mut connection = std::pin::pin!(connection);
    let mut exchange = std::pin::pin!(exchange);
    let mut connection_done = false;
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(result) = exchange.as_mut().poll(cx) {
            return std::task::Poll::Ready(result);
        }
        if !connection_done {
            connection_done = connection.as_mut().poll(cx).is_ready();
        }
        std::task::Poll::Pending
    })
    .await
}

/// The upstream's side of the connection: once the request is written (and dropped), reads
/// give `rest` then end of file. Before it, reads wait, as a real upstream would: an idle
/// client connection that reads bytes takes them as an unexpected message.
struct Replay<'a> {
    rest: &'a [u8],
    asked: bool,
}

impl hyper::rt::Read for Replay<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        // `poll_write` wakes the task (the only one) when the request comes.
        if !self.asked {
            return std::task::Poll::Pending;
        }
        let n = self.rest.len().min(buf.remaining());
        let (now, later) = self.rest.split_at(n);
        buf.put_slice(now);
        self.rest = later;
        std::task::Poll::Ready(Ok(()))
    }
}

impl hyper::rt::Write for Replay<'_> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if !self.asked {
            self.asked = true;
            cx.waker().wake_by_ref();
        }
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
