//! Helpers shared by the integration tests: fixtures and running the rewriter over chunks.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use toolpulse::{Config, Rewriter};

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The hand-made fixtures (`tests/fixtures/*.sse`, without the expected `*.out.sse`) and the
/// recorded streams under `tests/fixtures/recordings/`, as paths relative to the fixtures dir.
pub fn all_inputs() -> Vec<String> {
    let mut names = Vec::new();
    for dir in ["", "recordings/openai", "recordings/litellm"] {
        let entries = std::fs::read_dir(fixtures_dir().join(dir)).expect("fixtures dir");
        for entry in entries {
            let name = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name.ends_with(".sse") && !name.ends_with(".out.sse") {
                names.push(if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                });
            }
        }
    }
    names.sort();
    names
}

/// The config beside a hand-made fixture (`x.toml` for `x.sse`), else the defaults.
pub fn config_for(input: &str) -> Config {
    let path = fixtures_dir().join(input.replace(".sse", ".toml"));
    if path.exists() {
        Config::load(&path).expect("fixture config is valid")
    } else {
        Config::default()
    }
}

pub fn config_file(name: &str) -> Config {
    Config::load(&fixtures_dir().join(name)).expect("fixture config is valid")
}

/// Feeds `input` in the given chunks at one fixed instant; returns the whole output.
pub fn rewrite_chunks<'a>(
    config: &Arc<Config>,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    now: Instant,
) -> Vec<u8> {
    let mut rewriter = Rewriter::new(config.clone());
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&rewriter.feed(chunk, now));
    }
    out.extend_from_slice(&rewriter.finish(now));
    out
}

pub fn rewrite_whole(config: &Arc<Config>, input: &[u8], now: Instant) -> Vec<u8> {
    rewrite_chunks(config, [input], now)
}

/// Splits `input` at the given sorted offsets.
pub fn split_at<'a>(input: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for &p in points {
        chunks.push(&input[start..p]);
        start = p;
    }
    chunks.push(&input[start..]);
    chunks
}
