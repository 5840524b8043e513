//! Tools the gateway ran that no `[[tools]]` rule names. They are generic functions and get no
//! lifecycle events — the documented default — but a user who forgot the rule for an MCP tool
//! only sees nothing happen. So the proxy says so, once per name ([`Reported`]), and
//! `toolpulse check --upstream-sample FILE` lists them from a recorded stream ([`in_stream`]).

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config::Config;
use crate::lifecycle::Kind;
use crate::rewrite::{Observation, Rewriter};

/// Names a proxy remembers having reported; later new names are not logged, so neither the
/// memory nor the log can grow without bound on an upstream that invents names.
pub const MAX_REPORTED_NAMES: usize = 256;

/// Longer names are not reported: no real tool has one (OpenAI allows 64 characters), and a
/// log line should not carry an upstream's megabyte.
pub const MAX_NAME_BYTES: usize = 256;

/// [`in_stream`] feeds the rewriter this much at a time and collects its observations after
/// each piece, well within what the rewriter keeps between two collections.
const SAMPLE_CHUNK_BYTES: usize = 4096;

/// The tool's name, if this observation is a call that ran as a generic function for want of a
/// rule: its kind is `function` (the fallback: no built-in rule gives that kind), no config rule
/// matched, and its output arrived in the stream — the gateway ran it, so it was a tool of the
/// gateway's (an MCP tool, say) and not a function the client runs.
pub fn unconfigured_name(observation: &Observation) -> Option<&str> {
    match observation {
        Observation::CallFinished {
            name,
            kind: Kind::Function,
            rule: None,
            had_output: true,
            ..
        } => Some(name),
        _ => None,
    }
}

/// One line for the log: the name, what happened, and the config that would show the tool.
/// Names are quoted with escapes, so one from the upstream cannot break the line.
pub fn advice(name: &str) -> String {
    format!(
        "tool {name:?} has no [[tools]] rule and was treated as a generic function (no lifecycle \
         events); to show it, add to the config: [[tools]] match = [{name:?}] kind = \"mcp\""
    )
}

/// The names one proxy has reported, shared by its streams.
#[derive(Debug, Default)]
pub struct Reported {
    names: Mutex<HashSet<String>>,
}

impl Reported {
    /// Logs [`advice`] for `name` at `info` the first time it is seen.
    pub fn report(&self, name: &str) {
        if name.len() > MAX_NAME_BYTES {
            return;
        }
        let full = {
            let mut names = self
                .names
                .lock()
                .expect("never poisoned: no panics while held");
            if names.len() >= MAX_REPORTED_NAMES || !names.insert(name.to_string()) {
                return;
            }
            names.len() == MAX_REPORTED_NAMES
        };
        tracing::info!(tool = name, "{}", advice(name));
        if full {
            tracing::info!(
                "{MAX_REPORTED_NAMES} tools without a [[tools]] rule reported; further ones are not"
            );
        }
    }

    /// Starts over: a reloaded config may have dropped a rule, and its users deserve the advice.
    pub fn forget(&self) {
        self.names.lock().expect("never poisoned").clear();
    }
}

/// The names of the tools in a recorded upstream stream that ran as generic functions under
/// `config`, sorted.
pub fn in_stream(config: Arc<Config>, input: &[u8]) -> BTreeSet<String> {
    let now = Instant::now();
    let mut rewriter = Rewriter::new(config);
    let mut names = BTreeSet::new();
    let mut collect = |rewriter: &mut Rewriter| {
        for observation in rewriter.take_observations() {
            if let Some(name) = unconfigured_name(&observation) {
                names.insert(name.to_string());
            }
        }
    };
    for chunk in input.chunks(SAMPLE_CHUNK_BYTES) {
        rewriter.feed(chunk, now);
        collect(&mut rewriter);
    }
    rewriter.finish(now);
    collect(&mut rewriter);
    names
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn finished(name: &str, kind: Kind, rule: Option<usize>, had_output: bool) -> Observation {
        Observation::CallFinished {
            call_id: "call_1".into(),
            name: name.into(),
            kind,
            rule,
            had_output,
            outcome: "completed",
            error_kind: None,
            output: None,
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn only_functions_without_a_rule_that_the_gateway_ran() {
        let unconfigured = finished("lookup_user", Kind::Function, None, true);
        assert_eq!(unconfigured_name(&unconfigured), Some("lookup_user"));
        // A config rule that says `function` on purpose.
        assert_eq!(
            unconfigured_name(&finished("f", Kind::Function, Some(0), true)),
            None
        );
        // A client-side function: the response ended waiting for its output.
        assert_eq!(
            unconfigured_name(&finished("f", Kind::Function, None, false)),
            None
        );
        // Built-in kinds.
        assert_eq!(
            unconfigured_name(&finished("web_search", Kind::WebSearch, None, true)),
            None
        );
        assert_eq!(
            unconfigured_name(&Observation::Injected("response.mcp_call.completed")),
            None
        );
    }

    #[test]
    fn advice_is_one_line_with_the_rule_to_add() {
        let text = advice("lookup_user");
        assert!(
            text.ends_with(r#"[[tools]] match = ["lookup_user"] kind = "mcp""#),
            "{text}"
        );
        assert!(!advice("a\nb").contains('\n'));
    }

    #[test]
    fn the_memory_is_bounded() {
        let reported = Reported::default();
        for i in 0..MAX_REPORTED_NAMES + 10 {
            reported.report(&format!("tool_{i}"));
        }
        reported.report(&"x".repeat(MAX_NAME_BYTES + 1));
        let names = reported.names.lock().expect("lock");
        assert_eq!(names.len(), MAX_REPORTED_NAMES);
        assert!(!names.contains("tool_256"));
    }

    #[test]
    fn a_recorded_stream_lists_its_unconfigured_tools() {
        let input = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/function_untouched.sse"
        );
        let input = std::fs::read(input).expect("fixture");
        let names = in_stream(Arc::new(Config::default()), &input);
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["get_weather"]);
        let config = Config::from_toml_str("[[tools]]\nmatch = [\"get_*\"]\nkind = \"mcp\"\n")
            .expect("valid");
        assert!(in_stream(Arc::new(config), &input).is_empty());
    }
}
