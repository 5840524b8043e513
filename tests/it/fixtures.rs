//! Golden fixtures: every input under `tests/fixtures/` rewritten whole must equal its expected
//! output, satisfy the invariant checker, and give the same bytes however it is split.
//! `TOOLPULSE_BLESS=1 cargo test --test it fixtures::` rewrites the expected files (read them!).

use crate::common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use proptest::prelude::*;
use toolpulse::Config;

/// Inputs rewritten with a given config, whose output goes to a given golden file; on top of
/// every fixture with its own config (`x.toml`) or the defaults (profile `hosted`). Each of
/// these is also rewritten with profile `openai` (companions), golden in `openai/`.
const RECORDED_GOLDENS: &[(&str, &str, &str)] = &[
    (
        "recordings/openai/issue-19493-gpt-5.1-tool-call.sse",
        "recorded_mcp.toml",
        "issue-19493.mcp.out.sse",
    ),
    (
        "recordings/openai/issue-19493-gpt-5.1-tool-call.sse",
        "recorded_search.toml",
        "issue-19493.web_search.out.sse",
    ),
    (
        "recordings/openai/issue-19067-parallel-tool-call-wrapper.sse",
        "recorded_search.toml",
        "issue-19067.file_search.out.sse",
    ),
    (
        "recordings/litellm/function_tool.sse",
        "recorded_mcp.toml",
        "litellm_function_tool.mcp.out.sse",
    ),
    // LiteLLM's MCP streams under the config shipped for it: its own mcp_call folded into the
    // hosted item opened at the model's function_call.
    (
        "recordings/litellm-1.108.7/mcp_lookup_user.sse",
        "../../config/litellm.toml",
        "litellm-1.108.7.mcp_lookup_user.out.sse",
    ),
    (
        "recordings/litellm-1.108.7/mcp_fail_tool.sse",
        "../../config/litellm.toml",
        "litellm-1.108.7.mcp_fail_tool.out.sse",
    ),
    (
        "recordings/litellm-1.108.7/function_tool.sse",
        "../../config/litellm.toml",
        "recordings/litellm-1.108.7/function_tool.sse",
    ),
    (
        "recordings/openai/openai-mcp-tool.1.sse",
        "recorded_mcp.toml",
        "openai-mcp-tool.native_untouched.out.sse",
    ),
];

/// Inputs rendered with each payload profile (all four at once, and the inline OpenAI shape) under `profiles.toml`;
/// goldens in `profiles/<profile>/<input stem>.out.sse`.
const PROFILE_INPUTS: &[&str] = &[
    "web_search_json.sse",
    "mcp_failure_pattern.sse",
    "open_at_eof.sse",
    "parallel_reversed.sse",
    "secret_args.sse",
    "big_result_1mb.sse",
    "function_untouched.sse",
    "antwort_done_and_error.sse",
];
const PROFILE_SETS: &[(&str, &str)] = &[
    ("stages", r#"["stages"]"#),
    ("tool_call", r#"["tool_call"]"#),
    ("tool", r#"["tool"]"#),
    ("all", r#"["openai", "stages", "tool_call", "tool"]"#),
    ("openai-inline", r#"["openai-inline"]"#),
    ("hosted", r#"["hosted"]"#),
    (
        "hosted-all",
        r#"["hosted", "progress", "stages", "tool_call", "tool"]"#,
    ),
];

/// Recordings that are not passed through byte-for-byte under the defaults: their gateway
/// breaks a stream rule toolpulse mends (docs/stream-rules.md). Golden in
/// `<dir>.<stem>.mended.out.sse`.
const MENDED_RECORDINGS: &[&str] = &[
    // LiteLLM's terminal event changes the response id.
    "recordings/litellm/mcp_lookup_user.sse",
    "recordings/litellm/mcp_fail_tool.sse",
    "recordings/litellm-1.108.7/mcp_lookup_user.sse",
    "recordings/litellm-1.108.7/mcp_fail_tool.sse",
];

/// Which hand-made fixtures must come out byte-identical (nothing to inject).
const UNTOUCHED: &[&str] = &["no_tools.sse", "function_untouched.sse"];

fn golden_cases() -> Vec<(String, Config, String)> {
    let mut cases = Vec::new();
    for input in all_inputs() {
        let golden = if MENDED_RECORDINGS.contains(&input.as_str()) {
            let name = input
                .trim_start_matches("recordings/")
                .replacen('/', ".", 1);
            name.replace(".sse", ".mended.out.sse")
        } else if input.starts_with("recordings/") {
            input.clone() // default classification: the recordings pass through unchanged
        } else {
            input.replace(".sse", ".out.sse")
        };
        cases.push((input.clone(), config_for(&input), golden));
    }
    for (input, config, golden) in RECORDED_GOLDENS {
        cases.push((input.to_string(), config_file(config), golden.to_string()));
    }
    // The companion shape (`openai`, the default before `hosted`) of the same inputs.
    let companion: Vec<_> = cases
        .iter()
        .filter(|(input, _, golden)| golden != input && !golden.contains(".mended."))
        .map(|(input, config, golden)| {
            let mut config = config.clone();
            config.events.profiles = vec![toolpulse::core::profiles::Profile::OpenAi];
            (input.clone(), config, format!("openai/{golden}"))
        })
        .collect();
    cases.extend(companion);
    let base =
        std::fs::read_to_string(fixtures_dir().join("profiles.toml")).expect("profiles.toml");
    for (set, list) in PROFILE_SETS {
        let text = format!("{base}\n[events]\nprofiles = {list}\n");
        let config = Config::from_toml_str(&text).expect("valid profile config");
        for input in PROFILE_INPUTS {
            let golden = format!("profiles/{set}/{}", input.replace(".sse", ".out.sse"));
            cases.push((input.to_string(), config.clone(), golden));
        }
    }
    cases
}

#[test]
fn golden_outputs_and_invariants() {
    let bless = std::env::var_os("TOOLPULSE_BLESS").is_some();
    let now = Instant::now();
    for (input_name, config, golden) in golden_cases() {
        let input = read(&fixtures_dir().join(&input_name));
        let max = config.limits.max_event_bytes;
        let output = rewrite_whole(&Arc::new(config), &input, now);
        let report = invariants::check(&input, &output, max)
            .unwrap_or_else(|e| panic!("{input_name}: invariant broken: {e}"));
        let golden_path = fixtures_dir().join(&golden);
        if bless && golden != input_name {
            if let Some(dir) = golden_path.parent() {
                std::fs::create_dir_all(dir).expect("golden dir");
            }
            std::fs::write(&golden_path, &output).expect("write golden");
        }
        let expected = read(&golden_path);
        assert!(
            output == expected,
            "{input_name}: output differs from {golden}"
        );
        let must_be_untouched = input_name.starts_with("recordings/") && golden == input_name
            || UNTOUCHED.contains(&input_name.as_str())
                && (!golden.starts_with("profiles/")
                    || golden.starts_with("profiles/openai-inline/")
                    || golden.starts_with("profiles/hosted/"))
            || golden.contains("native_untouched");
        if must_be_untouched {
            assert!(
                output == input,
                "{input_name} must pass through byte-for-byte"
            );
        } else if !golden.contains(".mended.") {
            assert!(
                report.injected_events > 0,
                "{input_name} ({golden}): nothing injected"
            );
        }
    }
}

/// Split points worth trying: all of them for small inputs; for large ones every point next to
/// a line ending plus an even spread.
fn split_points(input: &[u8]) -> Vec<usize> {
    if input.len() <= 16 * 1024 {
        return (1..input.len()).collect();
    }
    let mut points: Vec<usize> = if input.len() <= 1 << 20 {
        input
            .iter()
            .enumerate()
            .filter(|(_, b)| matches!(b, b'\n' | b'\r'))
            .flat_map(|(i, _)| [i, i + 1])
            .collect()
    } else {
        Vec::new()
    };
    points.extend((1..16).map(|k| input.len() * k / 16));
    points.retain(|&p| p > 0 && p < input.len());
    points.sort_unstable();
    points.dedup();
    points
}

#[test]
fn every_split_point_gives_the_same_output() {
    let now = Instant::now();
    for (input_name, config, _) in golden_cases() {
        let config = Arc::new(config);
        let input = read(&fixtures_dir().join(&input_name));
        let whole = rewrite_whole(&config, &input, now);
        for p in split_points(&input) {
            let split = rewrite_chunks(&config, [&input[..p], &input[p..]], now);
            assert!(
                split == whole,
                "{input_name}: split at {p} changes the output"
            );
        }
        if input.len() <= 64 * 1024 {
            let bytewise = rewrite_chunks(&config, input.chunks(1), now);
            assert!(
                bytewise == whole,
                "{input_name}: one byte at a time changes the output"
            );
        }
    }
}

#[test]
fn small_event_limit_forwards_big_events_raw_and_loses_nothing() {
    let now = Instant::now();
    let mut config = Config::default();
    config.limits.max_event_bytes = 1024;
    let config = Arc::new(config);
    for input_name in all_inputs() {
        let input = read(&fixtures_dir().join(&input_name));
        let whole = rewrite_whole(&config, &input, now);
        invariants::check(&input, &whole, 1024)
            .unwrap_or_else(|e| panic!("{input_name}: invariant broken: {e}"));
        for chunk in [1, 7, 1000, 4096] {
            if input.len() > 1 << 20 && chunk < 1000 {
                continue;
            }
            let out = rewrite_chunks(&config, input.chunks(chunk), now);
            assert!(
                out == whole,
                "{input_name}: {chunk}-byte chunks change the output"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_multi_splits_give_the_same_output(
        case in 0..golden_cases().len(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..40),
    ) {
        let (input_name, config, _) = golden_cases().swap_remove(case);
        let config = Arc::new(config);
        let input = read(&fixtures_dir().join(&input_name));
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len())).collect();
        points.sort_unstable();
        points.dedup();
        let now = Instant::now();
        let whole = rewrite_whole(&config, &input, now);
        let split = rewrite_chunks(&config, split_at(&input, &points), now);
        prop_assert!(split == whole, "{}: splits at {:?}", input_name, points);
    }
}
