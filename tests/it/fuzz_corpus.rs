//! The fuzz targets on stable, as CI runs them: every input under `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/` goes through the target's check (`fuzz/checks.rs`), which
//! panics when a property fails. `fuzz/README.md` says how to fuzz for longer.

use crate::{checks, h1_request};

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// The inputs in `dir` (none when it does not exist), sorted.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.expect("corpus entry").path()).collect();
    files.retain(|p| p.is_file() && p.file_name().is_some_and(|n| n != ".gitkeep"));
    files.sort();
    files
}

/// Replays every file of the target's corpus and regressions through `check`; returns what it
/// returned for each. A missing or empty corpus fails: the test would check nothing.
fn replay<T: Send>(target: &str, check: fn(&[u8]) -> T) -> Vec<T> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let corpus = root.join("corpus").join(target);
    let mut files = inputs(&corpus);
    assert!(
        !files.is_empty(),
        "{}: no corpus (missing or empty); fuzz/README.md says how to make one",
        corpus.display()
    );
    // Regressions are optional: a target may never have failed.
    files.extend(inputs(&root.join("regressions").join(target)));
    let run = |path: &PathBuf| {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        catch_unwind(AssertUnwindSafe(|| check(&data))).unwrap_or_else(|_| {
            panic!(
                "{target}: {} fails its check (see the panic above)",
                path.display()
            )
        })
    };
    // One thread per CPU: the corpus is large and every input is independent.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let share = files.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(share)
            .map(|part| scope.spawn(move || part.iter().map(run).collect::<Vec<T>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

#[test]
fn parser_corpus_and_regressions() {
    replay("parser", checks::parser);
}

#[test]
fn rewriter_corpus_and_regressions() {
    let reports = replay("rewriter", checks::rewriter);
    // The corpus must reach the interesting paths, not only pass-through.
    let injecting = reports.iter().filter(|r| r.injected_events > 0).count();
    assert!(
        injecting * 10 >= reports.len(),
        "only {injecting} of {} corpus inputs inject anything",
        reports.len()
    );
    eprintln!("{} inputs, {injecting} injecting", reports.len());
}

#[test]
fn ag_ui_over_the_rewriter_corpus() {
    // The AG-UI target reads the rewriter's inputs: its corpus is the rewriter's.
    let reports = replay("rewriter", checks::ag_ui);
    let calling = reports.iter().filter(|r| r.tool_calls > 0).count();
    assert!(
        calling * 10 >= reports.len(),
        "only {calling} of {} corpus inputs show a tool call",
        reports.len()
    );
    eprintln!("{} inputs, {calling} with tool calls", reports.len());
}

#[test]
fn h1_corpus_and_regressions() {
    let accepted = replay("h1", checks::h1);
    // The corpus must reach both sides: responses read, and responses refused.
    let read = accepted.iter().filter(|a| **a).count();
    assert!(
        read > 0 && read < accepted.len(),
        "{read} of {} corpus inputs accepted",
        accepted.len()
    );
    eprintln!("{} inputs, {read} accepted", accepted.len());
}

#[test]
fn h1_request_corpus_and_regressions() {
    let read = replay("h1_request", h1_request::h1_request);
    // The corpus must reach both sides: requests read, and requests refused or cut.
    let accepted = read.iter().filter(|r| **r).count();
    assert!(
        accepted > 0 && accepted < read.len(),
        "{accepted} of {} corpus inputs read",
        read.len()
    );
    eprintln!("{} inputs, {accepted} read", read.len());
}
