//! The config's errors: each names the key and the line (or the file), and a syntax error is
//! said on one line for logs as well. A line that may hold a secret (a token, a key, a URL with
//! a password) is never quoted, only placed by its line and column.

/// Builds a config error for `key` at the byte span of the file's text: what each section's
/// validator is given to say what is wrong ([`ConfigError::Invalid`]).
pub(super) type Invalid<'a> = &'a dyn Fn(String, std::ops::Range<usize>, String) -> ConfigError;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {error}")]
    Read { path: String, error: std::io::Error },
    /// Not TOML, or a section, key or value type the config does not have. `report` is toml's
    /// own account (several lines: the offending line quoted, a caret under the spot); it is
    /// kept as text, not as a `#[source]`, because it already is the whole message and an error
    /// chain (`{:#}`) would print it twice.
    #[error("invalid config: {report}")]
    Syntax {
        report: String,
        /// The same on one line: "line 2, column 15: invalid type: … (in `interval_ms = "10s"`)".
        brief: String,
    },
    /// A key (or, at the top, a section) the config does not have: said as such, with its
    /// section and the nearest known key, rather than as toml's report.
    #[error("invalid config: line {line}: {}", unknown_key(key, section.as_deref(), known))]
    UnknownKey {
        key: String,
        /// The section's header as written (`[proxy]`, `[[tools]]`); `None` at the top level,
        /// where the key is a section.
        section: Option<String>,
        line: usize,
        /// The keys that section has.
        known: Vec<String>,
    },
    #[error("invalid config: line {line}: {key}: {message}")]
    Invalid {
        key: String,
        line: usize,
        message: String,
    },
    /// An error in the file at `path` ([`Config::load`]): said with the file's name, since it may
    /// come from `TOOLPULSE_CONFIG` rather than the command line.
    #[error("{path}: {error}")]
    InFile {
        path: String,
        error: Box<ConfigError>,
    },
}

/// How much of the offending line a one-line syntax error quotes.
const MAX_QUOTED_LINE_CHARS: usize = 80;

impl ConfigError {
    pub(super) fn syntax(error: toml::de::Error, text: &str) -> ConfigError {
        if let Some(unknown) = ConfigError::unknown(&error, text) {
            return unknown;
        }
        let report = plain_types(error.to_string().trim_end());
        let message = plain_types(&join_lines(error.message()));
        let brief = match error.span() {
            Some(span) => {
                let mut at = span.start.min(text.len());
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
                let line = text[..at].matches('\n').count() + 1;
                let column = text[line_start..at].chars().count() + 1;
                if may_hold_a_secret(&text[..line_start], &text[line_start..line_end]) {
                    let report = format!(
                        "TOML parse error at line {line}, column {column}\n{message}\n\
                         (the line is not shown: it may hold a secret)"
                    );
                    let brief = format!("line {line}, column {column}: {message}");
                    return ConfigError::Syntax { report, brief };
                }
                let quoted: String = text[line_start..line_end]
                    .trim()
                    .chars()
                    .take(MAX_QUOTED_LINE_CHARS)
                    .collect();
                format!("line {line}, column {column}: {message} (in `{quoted}`)")
            }
            None => message,
        };
        ConfigError::Syntax { report, brief }
    }

    /// toml's "unknown field `x`, expected one of `a`, `b`" as an [`ConfigError::UnknownKey`].
    fn unknown(error: &toml::de::Error, text: &str) -> Option<ConfigError> {
        let rest = error.message().strip_prefix("unknown field `")?;
        let (key, expected) = rest.split_once('`')?;
        let known = expected.split('`').skip(1).step_by(2).map(str::to_string);
        let at = error.span()?.start.min(text.len());
        let before = text.get(..at)?;
        let line = before.matches('\n').count() + 1;
        // The header the key is under: the last line before it that opens a table.
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let section = before[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .map(|header| {
                header
                    .split('#')
                    .next()
                    .unwrap_or(header)
                    .trim()
                    .to_string()
            });
        // A table header's own name ("[nosuch]") is a key of the top level.
        let on_header = text[line_start..].trim_start().starts_with('[');
        Some(ConfigError::UnknownKey {
            key: key.to_string(),
            section: if on_header { None } else { section },
            line,
            known: known.collect(),
        })
    }

    /// The error on one line, for log pipelines that take a line per entry (a SIGHUP reload).
    pub fn one_line(&self) -> String {
        match self {
            ConfigError::Syntax { brief, .. } => format!("invalid config: {brief}"),
            ConfigError::InFile { path, error } => format!("{path}: {}", error.one_line()),
            other => join_lines(&other.to_string()),
        }
    }
}

/// The keys whose values are never secret: a line setting one of them may be quoted in an
/// error. Any other line (a token, a key, a URL that may carry a password, a collector header,
/// a misspelt or unknown key, a line whose key cannot be read) is not: it is said by its line
/// and column only.
const QUOTABLE_KEYS: &[&str] = &[
    "match",
    "kind",
    "server_label",
    "summary",
    "count",
    "output_patterns",
    "interval_ms",
    "max_event_bytes",
    "max_open_calls",
    "max_open_call_bytes",
    "listen",
    "upstream_ca",
    "preserve_host",
    "connect_timeout_ms",
    "header_timeout_ms",
    "drain_timeout_ms",
    "max_connections",
    "max_header_bytes",
    "profiles",
    "allowed_profiles",
    "redact_keys",
    "max_string_bytes",
    "max_payload_bytes",
    "name",
    "call_name",
    "bind_window_ms",
    "min_interval_ms",
    "bus_prefix",
    "service_name",
    "sample_ratio",
    "record_payloads",
    "max_entries",
    "max_bytes",
    "ttl_ms",
    "max_json_bytes",
    "head_timeout_ms",
    "body_timeout_ms",
    "idle_timeout_ms",
    "ping_interval_ms",
    "ping_timeout_ms",
    "max_streams_per_connection",
    "body_buffer_bytes",
    "body_buffer_bytes_per_peer",
    "body_buffer_bytes_per_connection",
    "require_token",
];

/// Whether `line` (after the text `before` it) may hold a secret, so an error must not quote it.
fn may_hold_a_secret(before: &str, line: &str) -> bool {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return false;
    }
    if line.starts_with('[') {
        // A table header holds no value, unless it is a value written where a header is.
        return line.contains('=');
    }
    let section = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .unwrap_or("");
    if section.trim_matches(['[', ']', ' ']) == "telemetry.headers" {
        return true;
    }
    let Some((key, _)) = line.split_once('=') else {
        return true;
    };
    let key = key.trim().trim_matches(['"', '\'']);
    !QUOTABLE_KEYS.contains(&key)
}

/// serde's names of the types a key expects (`expected u64`), said in words a config's reader
/// knows (`expected a whole number (0 or more)`); what was found is said in TOML's words too.
fn plain_types(message: &str) -> String {
    const WORDS: [(&str, &str); 5] = [
        (
            r"expected (u8|u16|u32|u64|u128|usize)\b",
            "expected a whole number (0 or more)",
        ),
        (
            r"expected (i8|i16|i32|i64|i128|isize)\b",
            "expected a whole number",
        ),
        (r"expected (f32|f64)\b", "expected a number such as 1.0"),
        (r"expected a boolean\b", "expected true or false"),
        (
            r"expected a sequence\b",
            "expected a list such as [\"a\", \"b\"]",
        ),
    ];
    let mut text = message.to_string();
    for (pattern, words) in WORDS {
        let regex = regex::Regex::new(pattern).expect("a valid pattern");
        text = regex.replace_all(&text, words).into_owned();
    }
    text.replace("invalid type: sequence", "invalid type: a list")
        .replace("invalid type: map", "invalid type: a table")
        .replace("expected a map", "expected a table")
}

/// Text on one line: its lines trimmed and joined by a space (a regex error has several).
fn join_lines(text: &str) -> String {
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines.collect::<Vec<_>>().join(" ")
}

/// "unknown key `x` in [s]; did you mean `y`?" (or the keys the section has, when none is near).
fn unknown_key(key: &str, section: Option<&str>, known: &[String]) -> String {
    let what = match section {
        Some(section) => format!("unknown key `{key}` in {section}"),
        None => format!("unknown section [{key}]"),
    };
    // A known key inside the unknown one (or the other way round) first, then the closest.
    let nearest = known
        .iter()
        .map(|k| {
            let inside = k.contains(key) || key.contains(k.as_str());
            (!inside, edit_distance(key, k), k)
        })
        .filter(|&(outside, d, k)| !outside || d <= (k.len() / 3).max(2))
        .min_by_key(|&(outside, d, _)| (outside, d));
    match nearest {
        Some((_, _, k)) => format!("{what}; did you mean `{k}`?"),
        None if known.is_empty() => what,
        None => format!("{what}; it has: {}", known.join(", ")),
    }
}

/// Levenshtein distance, in chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}
