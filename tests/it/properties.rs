//! Property tests of the whole rewriter on generated streams: agentic Responses streams built
//! from random pieces (parallel calls, outputs in any order or never, terminal events, `[DONE]`,
//! comments, garbage, CRLF, unterminated tails), under every profile, checked by the invariant
//! checker and for independence from how the bytes are split.

use crate::common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use proptest::prelude::*;
use toolpulse::Config;

const NAMES: &[&str] = &[
    "web_search",
    "file_search",
    "github_issue",
    "get_weather",
    "secret_tool",
];

#[derive(Debug, Clone)]
enum Piece {
    Text,
    Added(usize, usize),
    Delta(usize),
    Done(usize, usize),
    Output(usize, bool),
    Terminal,
    DoneMarker,
    Comment,
    Garbage,
    Tail,
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        4 => Just(Piece::Text),
        2 => (0..4usize, 0..NAMES.len()).prop_map(|(c, n)| Piece::Added(c, n)),
        1 => (0..4usize).prop_map(Piece::Delta),
        2 => (0..4usize, 0..NAMES.len()).prop_map(|(c, n)| Piece::Done(c, n)),
        2 => (0..4usize, any::<bool>()).prop_map(|(c, f)| Piece::Output(c, f)),
        1 => Just(Piece::Terminal),
        1 => Just(Piece::DoneMarker),
        1 => Just(Piece::Comment),
        1 => Just(Piece::Garbage),
        1 => Just(Piece::Tail),
    ]
}

/// Renders the pieces as SSE, numbered densely when `numbered`, with `\r\n` when `crlf`.
fn render(pieces: &[Piece], numbered: bool, crlf: bool) -> Vec<u8> {
    let nl = if crlf { "\r\n" } else { "\n" };
    let mut seq = 0u64;
    let mut out = String::new();
    let mut event = |out: &mut String, kind: &str, rest: String| {
        let number = if numbered {
            format!(",\"sequence_number\":{seq}")
        } else {
            String::new()
        };
        seq += 1;
        out.push_str(&format!(
            "event: {kind}{nl}data: {{\"type\":\"{kind}\"{number}{rest}}}{nl}{nl}"
        ));
    };
    for p in pieces {
        match p {
            Piece::Text => event(
                &mut out,
                "response.output_text.delta",
                r#","item_id":"m","output_index":9,"delta":"hi ""#.into(),
            ),
            Piece::Added(c, n) | Piece::Done(c, n) => {
                let kind = if matches!(p, Piece::Added(..)) {
                    "response.output_item.added"
                } else {
                    "response.output_item.done"
                };
                let item = format!(
                    r#","output_index":{c},"item":{{"id":"fc_{c}","type":"function_call","name":"{}","call_id":"call_{c}","arguments":"{{\"api_key\":\"k\",\"q\":\"x\"}}"}}"#,
                    NAMES[*n]
                );
                event(&mut out, kind, item);
            }
            Piece::Delta(c) => event(
                &mut out,
                "response.function_call_arguments.delta",
                format!(r#","item_id":"fc_{c}","output_index":{c},"delta":"{{\"q\":"#),
            ),
            Piece::Output(c, failed) => {
                let text = if *failed {
                    "search failed: boom"
                } else {
                    "[1,2,3]"
                };
                let item = format!(
                    r#","output_index":7,"item":{{"id":"o_{c}","type":"function_call_output","call_id":"call_{c}","output":"{text}","status":"completed"}}"#
                );
                event(&mut out, "response.output_item.added", item);
            }
            Piece::Terminal => event(
                &mut out,
                "response.completed",
                r#","response":{"id":"r"}"#.into(),
            ),
            Piece::DoneMarker => out.push_str(&format!("data: [DONE]{nl}{nl}")),
            Piece::Comment => out.push_str(&format!(": keep-alive{nl}{nl}")),
            Piece::Garbage => out.push_str(&format!("data: {{not json{nl}{nl}")),
            Piece::Tail => {}
        }
    }
    if matches!(pieces.last(), Some(Piece::Tail)) {
        out.push_str("event: response.output_text.delta\ndata: {\"type\":\"resp");
    }
    out.into_bytes()
}

const PROFILES: &[&str] = &[
    r#"["openai"]"#,
    r#"["stages"]"#,
    r#"["tool_call", "tool"]"#,
    r#"["openai", "stages", "tool_call", "tool"]"#,
];

fn config(profiles: usize) -> Config {
    let text = format!(
        "[[tools]]\nmatch = [\"github_*\"]\nkind = \"mcp\"\n[[tools]]\nmatch = [\"secret_*\"]\nkind = \"ignore\"\n\
         [failure]\noutput_patterns = [\"^search failed: \"]\n[events]\nprofiles = {}\n",
        PROFILES[profiles]
    );
    Config::from_toml_str(&text).expect("valid")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn generated_streams_keep_every_invariant_however_split(
        pieces in prop::collection::vec(piece(), 0..40),
        numbered in any::<bool>(),
        crlf in any::<bool>(),
        profiles in 0..PROFILES.len(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let input = render(&pieces, numbered, crlf);
        let config = Arc::new(config(profiles));
        let now = Instant::now();
        let whole = rewrite_whole(&config, &input, now);
        if let Err(e) = invariants::check(&input, &whole, usize::MAX) {
            prop_assert!(false, "{}\n--- input ---\n{}\n--- output ---\n{}", e,
                String::from_utf8_lossy(&input), String::from_utf8_lossy(&whole));
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        points.sort_unstable();
        let split = rewrite_chunks(&config, split_at(&input, &points), now);
        prop_assert!(split == whole, "split at {:?} changes the output", points);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_pass_through(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let config = Arc::new(config(3));
        let now = Instant::now();
        let whole = rewrite_whole(&config, &bytes, now);
        prop_assert!(invariants::check(&bytes, &whole, usize::MAX).is_ok());
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        prop_assert!(rewrite_chunks(&config, split_at(&bytes, &points), now) == whole);
    }
}
