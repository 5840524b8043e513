//! `[progress] bus` and `bus_prefix`: the Redis (or Valkey) that replicas share their open
//! calls through. The URL may carry a password, so it is never printed whole: `Display` and
//! `Debug` show the scheme, host, port and database only.

use std::fmt;

use redis::IntoConnectionInfo;

/// The environment variable that may carry the bus URL (with its password, kept out of config
/// files). When set, it wins over the file's `bus`.
pub const REDIS_URL_ENV: &str = "TOOLPULSE_REDIS_URL";
pub const DEFAULT_BUS_PREFIX: &str = "toolpulse";
/// A longer prefix only makes every key longer.
pub const MAX_BUS_PREFIX_CHARS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusConfig {
    pub url: RedisUrl,
    /// Every key and channel starts with `<prefix>:`.
    pub prefix: String,
}

/// A `redis://` or `rediss://` URL, checked when the config is read.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

impl RedisUrl {
    pub fn parse(text: &str) -> Result<RedisUrl, String> {
        let scheme = text.split_once("://").map(|(s, _)| s);
        if !matches!(scheme, Some("redis" | "rediss")) {
            return Err("must start with redis:// or rediss:// (TLS)".into());
        }
        text.into_connection_info()
            .map_err(|e| format!("not a Redis URL: {e}"))?;
        Ok(RedisUrl(text.to_string()))
    }

    /// The whole URL, password included: for the client only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RedisUrl {
    /// `scheme://host:port/db`, without user or password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (scheme, rest) = self.0.split_once("://").unwrap_or(("redis", &self.0));
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let rest = rest.split(['?', '#']).next().unwrap_or(rest);
        write!(f, "{scheme}://{rest}")
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({self})")
    }
}

pub(super) fn prefix(text: &str) -> Result<String, String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if text.is_empty() || text.chars().count() > MAX_BUS_PREFIX_CHARS || !text.chars().all(plain) {
        return Err(format!(
            "must be 1 to {MAX_BUS_PREFIX_CHARS} letters, digits, '-', '_', '.' or ':'"
        ));
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_never_shown_with_their_password() {
        let url = RedisUrl::parse("redis://:s3cret@cache:6380/2").expect("valid");
        assert_eq!(url.to_string(), "redis://cache:6380/2");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert_eq!(url.expose(), "redis://:s3cret@cache:6380/2");
        let tls =
            RedisUrl::parse("rediss://user:pw@cache.example:6379/0?protocol=resp2").expect("tls");
        assert_eq!(tls.to_string(), "rediss://cache.example:6379/0");
        for bad in [
            "http://cache:6379",
            "cache:6379",
            "redis://",
            "redis://h:notaport",
        ] {
            assert!(RedisUrl::parse(bad).is_err(), "{bad}");
        }
        assert!(prefix("tp-prod:eu").is_ok());
        for bad in ["", "a b", "x{y}", &"p".repeat(65)] {
            assert!(prefix(bad).is_err(), "{bad}");
        }
    }
}
