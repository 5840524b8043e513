//! Throughput of the rewriting core (`cargo bench --bench rewrite`), on generated antwort-shaped
//! streams: (a) text only — nothing to inject, every byte forwarded — and (b) a web_search tool
//! round every 50 events — injection plus renumbering of every later event, under the default
//! profile (`hosted`) and under `openai` (companions) — each fed in 16 KiB, 1 KiB and 64 B chunks;
//! plus a real recorded OpenAI stream. Criterion reports bytes/s; the event count per stream is
//! printed so events/s follows. The chunks go in as the proxy feeds them (`Rewriter::feed_into`:
//! `Bytes` in, pieces into a queue kept across chunks). Group `long_arguments`: one call whose 256
//! KiB or 1 MiB of arguments arrive in 4-byte deltas, under `hosted` and `stages`.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use toolpulse::core::profiles::Profile;
use toolpulse::{Config, Rewriter};

const EVENTS: usize = 5_000;
const TOOL_EVERY: usize = 50;

fn event(seq: &mut u64, kind: &str, rest: &str) -> String {
    let line = format!(
        "event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{seq},{rest}}}\n\n"
    );
    *seq += 1;
    line
}

/// `EVENTS` events of ~20-character text deltas, with a web_search round every `tool_every`.
fn stream(tool_every: Option<usize>) -> Vec<u8> {
    let mut seq = 0;
    let mut out = String::new();
    let mut call = 0;
    while (seq as usize) < EVENTS {
        if let Some(every) = tool_every
            && seq as usize % every == every - 1
        {
            call += 1;
            let item = format!(
                r#""output_index":1,"item":{{"id":"fc_{call}","type":"function_call","name":"web_search","call_id":"c{call}","arguments":"{{}}"}}"#
            );
            out += &event(&mut seq, "response.output_item.added", &item);
            out += &event(&mut seq, "response.output_item.done", &item);
            let output = format!(
                r#""output_index":2,"item":{{"id":"o_{call}","type":"function_call_output","call_id":"c{call}","output":"3 results","status":"completed"}}"#
            );
            out += &event(&mut seq, "response.output_item.added", &output);
        } else {
            let delta = r#""item_id":"msg_1","output_index":3,"content_index":0,"delta":"some words of text ""#;
            out += &event(&mut seq, "response.output_text.delta", delta);
        }
    }
    out.into_bytes()
}

/// One MCP call whose arguments (`bytes` of them) stream in 4-byte deltas, then its output
/// (the quadratic-cost case of issue 28: each delta once copied the arguments so far).
fn long_arguments(bytes: usize) -> Vec<u8> {
    let mut seq = 0;
    let item = r#""output_index":0,"item":{"id":"fc_1","type":"function_call","name":"mcp_lookup","call_id":"c1","arguments":""}"#;
    let mut out = event(&mut seq, "response.output_item.added", item);
    for _ in 0..bytes / 4 {
        let delta = r#""item_id":"fc_1","output_index":0,"delta":"abcd""#;
        out += &event(&mut seq, "response.function_call_arguments.delta", delta);
    }
    let output = r#""output_index":1,"item":{"id":"o_1","type":"function_call_output","call_id":"c1","output":"ok","status":"completed"}"#;
    out += &event(&mut seq, "response.output_item.added", output);
    out.into_bytes()
}

/// As the proxy feeds it: chunks of the upstream body as `Bytes`, the output as pieces (slices
/// of the chunks where nothing changed).
fn rewrite(config: &Arc<Config>, input: &Bytes, chunk: usize) -> usize {
    let now = Instant::now();
    let mut rewriter = Rewriter::new(config.settings());
    let mut out = 0;
    let mut pieces = Vec::new();
    for start in (0..input.len()).step_by(chunk) {
        let piece = input.slice(start..(start + chunk).min(input.len()));
        rewriter.feed_into(piece, now, &mut pieces);
        out += pieces.drain(..).map(|p| p.len()).sum::<usize>();
    }
    out + rewriter.finish(now).len()
}

fn bench(c: &mut Criterion) {
    let config = Arc::new(Config::default());
    // The companion shape (`openai`), the default before `hosted`: the tools stream under both.
    let mut companion = Config::default();
    companion.events.profiles = vec![Profile::OpenAi];
    let companion = Arc::new(companion);
    let mut group = c.benchmark_group("rewrite");
    let tools = Bytes::from(stream(Some(TOOL_EVERY)));
    for (name, input, config) in [
        ("text_only", Bytes::from(stream(None)), &config),
        ("tools_every_50", tools.clone(), &config),
        ("tools_every_50_openai", tools, &companion),
    ] {
        eprintln!("{name}: {} bytes, {EVENTS} events per stream", input.len());
        group.throughput(Throughput::Bytes(input.len() as u64));
        for chunk in [16 * 1024, 1024, 64] {
            let id = BenchmarkId::new(name, format!("{chunk}B_chunks"));
            group.bench_with_input(id, &input, |b, input| {
                b.iter(|| rewrite(config, black_box(input), chunk))
            });
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recordings/openai/openai-mcp-tool.1.sse");
    let recorded = Bytes::from(std::fs::read(&path).expect("recorded fixture"));
    group.throughput(Throughput::Bytes(recorded.len() as u64));
    group.bench_function("recorded_openai_mcp_16KiB_chunks", |b| {
        b.iter(|| rewrite(&config, black_box(&recorded), 16 * 1024))
    });
    group.finish();

    // Long streamed arguments: the work per delta must not grow with the arguments so far.
    let mut stages = Config::default();
    stages.events.profiles = vec![Profile::Stages];
    let stages = Arc::new(stages);
    let mut group = c.benchmark_group("long_arguments");
    group.sample_size(10);
    for kib in [256, 1024] {
        let input = Bytes::from(long_arguments(kib * 1024));
        group.throughput(Throughput::Bytes(input.len() as u64));
        for (profile, config) in [("hosted", &config), ("stages", &stages)] {
            let id = BenchmarkId::new(profile, format!("{kib}KiB_in_4B_deltas"));
            group.bench_with_input(id, &input, |b, input| {
                b.iter(|| rewrite(config, black_box(input), 16 * 1024))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
