//! Tools the gateway ran that no `[[tools]]` rule names. They are generic functions and get no
//! lifecycle events — the documented default — but a user who forgot the rule for an MCP tool
//! only sees nothing happen. So the proxy says so, once per name ([`Reported`]), and
//! `toolpulse check --upstream-sample FILE` lists them from a recorded stream ([`in_stream`]).

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config::Config;
use crate::core::lifecycle::Kind;
use crate::core::rewrite::{Observation, Rewriter};

/// Names a proxy remembers having reported; later new names are not logged, so neither the
/// memory nor the log can grow without bound on an upstream that invents names.
pub const MAX_REPORTED_NAMES: usize = 256;

/// Longer names are not reported: no real tool has one (OpenAI allows 64 characters), and a
/// log line should not carry an upstream's megabyte. The tracker follows no longer name either.
pub const MAX_NAME_BYTES: usize = crate::core::lifecycle::track::MAX_NAME_BYTES;

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

/// For the log: the name and what happened on one line, then the rule that would show the
/// tool as the lines to paste into the config. Names are quoted with escapes ([`toml_string`]),
/// so one from the upstream can neither add a line nor break the rule.
pub fn advice(name: &str) -> String {
    format!(
        "tool {} has no [[tools]] rule and was treated as a generic function (no lifecycle \
         events); to show it, add to the config:\n{}",
        toml_string(name),
        rule(&[name])
    )
}

/// The `[[tools]]` rule that shows `names` as MCP tools, as TOML lines (no final newline); a
/// glob character or a backslash in a name is matched as itself.
pub fn rule(names: &[&str]) -> String {
    let quoted: Vec<String> = names
        .iter()
        // A backslash escapes in a glob (on Unix): doubled, it is itself.
        .map(|n| toml_string(&globset::escape(n).replace('\\', "\\\\")))
        .collect();
    format!("[[tools]]\nmatch = [{}]\nkind = \"mcp\"", quoted.join(", "))
}

/// `text` as a TOML basic string: quotes and backslashes escaped, and every control character
/// (TOML allows none raw but tab; here not even tab) as `\uXXXX`.
pub fn toml_string(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
        // No fields: in the text format they would follow the message, on the rule's last line.
        tracing::info!("{}", advice(name));
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
    let mut rewriter = Rewriter::new(config.settings());
    let mut names = BTreeSet::new();
    let mut collect = |rewriter: &mut Rewriter| {
        for observation in rewriter.take_observations().into_iter().flatten() {
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
    fn advice_ends_with_the_rule_as_lines_to_paste() {
        let text = advice("lookup_user");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1..],
            ["[[tools]]", r#"match = ["lookup_user"]"#, r#"kind = "mcp""#],
            "{text}"
        );
        assert!(lines[0].starts_with(r#"tool "lookup_user" has no [[tools]] rule"#));
        // Whatever the upstream names a tool: four lines, and the rule classifies that name.
        for name in [
            "lookup_user",
            "a\nb",
            "q\"uote\\back",
            "tab\there\u{7f}\r",
            "ünï",
            "glob*[x",
        ] {
            let text = advice(name);
            assert_eq!(text.lines().count(), 4, "{text:?}");
            let pasted = text.split_once('\n').expect("the rule").1;
            let config = Config::from_toml_str(pasted).unwrap_or_else(|e| panic!("{pasted}: {e}"));
            assert_eq!(config.classifier.classify(name), Kind::Mcp, "{pasted}");
        }
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
