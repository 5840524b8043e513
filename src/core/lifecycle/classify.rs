//! Tool name → [`Kind`] by ordered, first-match-wins glob patterns, and the rules that decide
//! whether a tool's output means it failed.

use std::borrow::Cow;
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::RegexSet;

use super::call::{Failure, Kind, Outcome};

/// Where a classification rule came from, for `toolpulse check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Config,
    Default,
}

/// A `[[tools]]` rule (or a built-in one): names matching any of its patterns are of its kind.
#[derive(Debug, Clone)]
pub struct ToolRule {
    pub patterns: Vec<String>,
    pub kind: Kind,
    pub origin: Origin,
}

/// The built-in rules, tried after the config's.
const DEFAULT_RULES: &[(&[&str], Kind)] = &[
    (&["web_search", "web_search_preview"], Kind::WebSearch),
    (&["file_search"], Kind::FileSearch),
];

/// What a name matching no rule is.
pub const FALLBACK: Kind = Kind::Function;

/// A glob that does not compile: which rule, which pattern, why.
#[derive(Debug)]
pub struct BadGlob {
    pub rule: usize,
    pub pattern: usize,
    pub error: globset::Error,
}

/// Shared (cloned per stream's settings at the cost of a count): the rules and their compiled
/// globs never change once built.
#[derive(Debug, Clone)]
pub struct Classifier {
    rules: Arc<[ToolRule]>,
    set: Arc<GlobSet>,
    /// For each glob in `set`, the index of its rule.
    rule_of_glob: Arc<[usize]>,
}

impl Classifier {
    /// Builds the classifier from the config's rules; the defaults are appended after them.
    pub fn new(config_rules: Vec<(Vec<String>, Kind)>) -> Result<Self, BadGlob> {
        let defaults = DEFAULT_RULES.iter().map(|(patterns, kind)| ToolRule {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            kind: *kind,
            origin: Origin::Default,
        });
        let rules: Vec<ToolRule> = config_rules
            .into_iter()
            .map(|(patterns, kind)| ToolRule {
                patterns,
                kind,
                origin: Origin::Config,
            })
            .chain(defaults)
            .collect();
        let mut builder = GlobSetBuilder::new();
        let mut rule_of_glob = Vec::new();
        for (rule_index, rule) in rules.iter().enumerate() {
            for (pattern_index, pattern) in rule.patterns.iter().enumerate() {
                let glob = GlobBuilder::new(pattern)
                    .literal_separator(false)
                    .build()
                    .map_err(|error| BadGlob {
                        rule: rule_index,
                        pattern: pattern_index,
                        error,
                    })?;
                builder.add(glob);
                rule_of_glob.push(rule_index);
            }
        }
        let set = builder.build().map_err(|error| BadGlob {
            rule: 0,
            pattern: 0,
            error,
        })?;
        Ok(Classifier {
            rules: rules.into(),
            set: Arc::new(set),
            rule_of_glob: rule_of_glob.into(),
        })
    }

    /// The kind of the first rule with a pattern matching `name`, else [`FALLBACK`].
    pub fn classify(&self, name: &str) -> Kind {
        self.classify_rule(name).0
    }

    /// The kind, and the index of the config rule that decided it (`None` for a built-in rule
    /// or the fallback).
    pub fn classify_rule(&self, name: &str) -> (Kind, Option<usize>) {
        let first = self
            .set
            .matches(name)
            .into_iter()
            .map(|glob| self.rule_of_glob[glob])
            .min();
        match first {
            Some(rule) if self.rules[rule].origin == Origin::Config => {
                (self.rules[rule].kind, Some(rule))
            }
            Some(rule) => (self.rules[rule].kind, None),
            None => (FALLBACK, None),
        }
    }

    /// Every rule in the order tried, config rules first.
    pub fn rules(&self) -> &[ToolRule] {
        &self.rules
    }
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::new(Vec::new()).expect("the built-in patterns are valid globs")
    }
}

/// What a `function_call_output` item says about how its tool went.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OutputFacts<'a> {
    pub status: Option<Cow<'a, str>>,
    /// The raw JSON of a non-null `error`.
    pub error: Option<Cow<'a, str>>,
    /// The output text (a string output, or each text part of a list output).
    pub texts: Vec<Cow<'a, str>>,
}

/// The error kind of a failure found by an output pattern given without a kind.
pub const DEFAULT_PATTERN_KIND: &str = "tool_error";

/// The `[failure]` rules.
#[derive(Debug, Clone)]
pub struct FailureRules {
    patterns: RegexSet,
    /// For each pattern, the `error.kind` a match reports.
    kinds: Vec<String>,
}

impl FailureRules {
    /// Compiles the output patterns; on error, the index of the pattern that failed.
    pub fn new(patterns: &[String]) -> Result<Self, (usize, regex::Error)> {
        let kinds = vec![DEFAULT_PATTERN_KIND.to_string(); patterns.len()];
        FailureRules::with_kinds(patterns, kinds)
    }

    /// Like `new`, with the `error.kind` each pattern reports.
    pub fn with_kinds(
        patterns: &[String],
        kinds: Vec<String>,
    ) -> Result<Self, (usize, regex::Error)> {
        for (i, p) in patterns.iter().enumerate() {
            regex::Regex::new(p).map_err(|e| (i, e))?;
        }
        let patterns = RegexSet::new(patterns).map_err(|e| (0, e))?;
        Ok(FailureRules { patterns, kinds })
    }

    pub fn patterns(&self) -> &[String] {
        self.patterns.patterns()
    }

    pub fn kinds(&self) -> &[String] {
        &self.kinds
    }

    /// The `error.kind` a client is told for a failure.
    pub fn kind_of(&self, failure: &Failure) -> String {
        match failure {
            Failure::Status(status) => format!("status_{status}"),
            Failure::Error => "error".to_string(),
            Failure::Pattern(i) => self.kinds.get(*i).cloned().unwrap_or_default(),
            Failure::NoOutput => "no_output".to_string(),
        }
    }

    /// Failed when the status is `failed`/`incomplete`, an `error` is present, or a text matches
    /// an output pattern (checked in that order); otherwise completed.
    pub fn judge(&self, facts: &OutputFacts<'_>) -> Outcome {
        if let Some(status @ ("failed" | "incomplete")) = facts.status.as_deref() {
            return Outcome::Failed(Failure::Status(status.to_string()));
        }
        if facts.error.is_some() {
            return Outcome::Failed(Failure::Error);
        }
        let first_match = facts
            .texts
            .iter()
            .filter_map(|t| self.patterns.matches(t).into_iter().next())
            .min();
        match first_match {
            Some(i) => Outcome::Failed(Failure::Pattern(i)),
            None => Outcome::Completed,
        }
    }
}

impl Default for FailureRules {
    fn default() -> Self {
        FailureRules::new(&[]).expect("an empty set compiles")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(r: &[(&[&str], Kind)]) -> Classifier {
        Classifier::new(
            r.iter()
                .map(|(p, k)| (p.iter().map(|s| s.to_string()).collect(), *k))
                .collect(),
        )
        .expect("valid")
    }

    #[test]
    fn defaults() {
        let c = Classifier::default();
        assert_eq!(c.classify("web_search"), Kind::WebSearch);
        assert_eq!(c.classify("web_search_preview"), Kind::WebSearch);
        assert_eq!(c.classify("file_search"), Kind::FileSearch);
        assert_eq!(c.classify("web_search_exa"), Kind::Function);
        assert_eq!(c.classify("get_weather"), Kind::Function);
    }

    #[test]
    fn first_match_wins_and_config_overrides_defaults() {
        let c = rules(&[
            (&["github_*"], Kind::Mcp),
            (&["github_search", "web_search"], Kind::Ignore),
            (&["*search*"], Kind::FileSearch),
        ]);
        assert_eq!(c.classify("github_search"), Kind::Mcp);
        assert_eq!(c.classify("web_search"), Kind::Ignore);
        assert_eq!(c.classify("file_search"), Kind::FileSearch);
        assert_eq!(c.classify("web_search_preview"), Kind::FileSearch);
        assert_eq!(
            c.classify("github_a/b"),
            Kind::Mcp,
            "names may hold slashes"
        );
    }

    #[test]
    fn bad_glob_names_its_place() {
        let err = Classifier::new(vec![
            (vec!["ok".into()], Kind::Mcp),
            (vec!["fine".into(), "a[".into()], Kind::Mcp),
        ])
        .expect_err("unclosed class");
        assert_eq!((err.rule, err.pattern), (1, 1));
    }

    #[test]
    fn failure_rules() {
        let f =
            FailureRules::new(&["^search failed: ".into(), "^no executor".into()]).expect("valid");
        let facts =
            |status: Option<&'static str>, has_error: bool, text: &'static str| OutputFacts {
                status: status.map(Cow::Borrowed),
                error: has_error.then_some(Cow::Borrowed("{}")),
                texts: vec![Cow::Borrowed(text)],
            };
        assert_eq!(
            f.judge(&facts(Some("completed"), false, "8 results")),
            Outcome::Completed
        );
        assert_eq!(
            f.judge(&facts(Some("incomplete"), false, "")),
            Outcome::Failed(Failure::Status("incomplete".into()))
        );
        assert_eq!(
            f.judge(&facts(None, true, "")),
            Outcome::Failed(Failure::Error)
        );
        assert_eq!(
            f.judge(&facts(
                Some("completed"),
                false,
                "no executor found for tool x"
            )),
            Outcome::Failed(Failure::Pattern(1))
        );
        assert_eq!(
            f.judge(&facts(None, false, "the search failed: no")),
            Outcome::Completed,
            "anchored"
        );
        assert_eq!(FailureRules::new(&["(".into()]).err().map(|e| e.0), Some(0));
    }
}
