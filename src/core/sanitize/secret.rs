//! Which keys are secret: a key is secret iff a redact pattern (a glob, case-insensitive, `*`
//! crossing `/`) matches it; the value of a secret key becomes [`REDACTED`].

use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

pub const DEFAULT_REDACT_PATTERNS: &[&str] = &[
    "*key*",
    "*token*",
    "*secret*",
    "*password*",
    "authorization",
    "cookie",
];

/// What the value of a secret key becomes.
pub const REDACTED: &str = "[REDACTED]";

/// The compiled redact patterns. Shared: every redactor of every tool call uses the one
/// compile.
#[derive(Debug, Clone)]
pub struct SecretKeys(Arc<GlobSet>);

impl SecretKeys {
    /// Errors name the index of the bad pattern.
    pub fn new(patterns: &[String]) -> Result<Self, (usize, globset::Error)> {
        let mut builder = GlobSetBuilder::new();
        for (index, pattern) in patterns.iter().enumerate() {
            let glob = GlobBuilder::new(pattern)
                .case_insensitive(true)
                // Keys are not paths: `*` must also match `/`.
                .literal_separator(false)
                .build()
                .map_err(|error| (index, error))?;
            builder.add(glob);
        }
        // Each glob compiled alone, so the set can only fail on the combined regex's size limit,
        // which the last pattern is the one to push over.
        let set = builder
            .build()
            .map_err(|error| (patterns.len().saturating_sub(1), error))?;
        Ok(SecretKeys(Arc::new(set)))
    }

    /// Whether `key` (decoded) is secret.
    pub fn is_secret(&self, key: &str) -> bool {
        self.0.is_match(key)
    }
}
