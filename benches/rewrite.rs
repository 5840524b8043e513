//! Throughput of the rewriting core on recorded and hand-made streams, fed in 16 KiB chunks.
//! `cargo bench --bench rewrite`

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use toolpulse::{Config, Rewriter};

const CHUNK_BYTES: usize = 16 * 1024;

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rewrite(config: &Arc<Config>, input: &[u8]) -> usize {
    let now = Instant::now();
    let mut rewriter = Rewriter::new(config.clone());
    let mut out = 0;
    for chunk in input.chunks(CHUNK_BYTES) {
        out += rewriter.feed(chunk, now).len();
    }
    out + rewriter.finish(now).len()
}

fn bench(c: &mut Criterion) {
    let config = Arc::new(Config::default());
    let mut group = c.benchmark_group("rewrite");
    for name in [
        "recordings/openai/openai-mcp-tool.1.sse",
        "recordings/litellm/mcp_lookup_user.sse",
        "parallel_reversed.sse",
    ] {
        let input = fixture(name);
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_function(name, |b| b.iter(|| rewrite(&config, black_box(&input))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
