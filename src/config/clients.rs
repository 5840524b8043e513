//! The `[clients]` section: what every client connection of the proxy, MCP and admin listeners
//! gets, so that no client holds a connection or memory for long (the listeners apply it).
//!
//! ```toml
//! [clients]
//! head_timeout_ms = 30000            # a request head within this of the accept (or, on
//!                                    # HTTP/1, of the previous response)
//! body_timeout_ms = 60000            # a body toolpulse reads whole arrives within this; a
//!                                    # streamed one may pause this long between two reads
//! idle_timeout_ms = 75000            # no request in flight this long: closed (HTTP/2: GOAWAY)
//! send_timeout_ms = 60000            # a response the client takes no byte of this long: closed
//! ping_interval_ms = 30000           # HTTP/2 pings this often; no answer in
//! ping_timeout_ms = 20000            # this long: closed
//! max_streams_per_connection = 100   # concurrent HTTP/2 streams
//! body_buffer_bytes = 67108864       # bodies read whole, held at once, all listeners (64 MiB)
//! body_buffer_bytes_per_peer = 8519680        # of which one peer address, per listener
//!                                             # (default: an eighth, at least two bodies)
//! body_buffer_bytes_per_connection = 8519680  # of which one connection (two bodies)
//! ```

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Invalid};

pub const DEFAULT_HEAD_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 60_000;
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 75_000;
/// As nginx's `send_timeout`.
pub const DEFAULT_SEND_TIMEOUT_MS: u64 = 60_000;
pub const DEFAULT_PING_INTERVAL_MS: u64 = 30_000;
pub const DEFAULT_PING_TIMEOUT_MS: u64 = 20_000;
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 100;
pub const DEFAULT_BODY_BUFFER_BYTES: usize = 64 << 20;
/// The budget must hold one body read whole (4 MiB and the frame that went over).
pub const MIN_BODY_BUFFER_BYTES: usize = 8 << 20;
/// What one body read whole may hold: the 4 MiB read limit and the frame that went over it
/// (at most 64 KiB, the HTTP/1 server's largest read; an HTTP/2 frame is 16 KiB). A share
/// smaller than this would refuse such a body even when nothing else is held.
pub const ONE_BODY_BYTES: usize = (4 << 20) + (64 << 10);
/// The least share a connection and a peer get by default: a body read whole and the body
/// toolpulse builds from it (a `POST …/responses` whose hosted items it maps back), so that a
/// lone request is never refused for its share (8 MiB and 128 KiB).
pub const DEFAULT_MIN_SHARE_BYTES: usize = 2 * ONE_BODY_BYTES;
/// The part of the budget one peer address may hold when `body_buffer_bytes_per_peer` is not
/// set: an eighth, so that it takes at least eight addresses to fill the budget.
pub const DEFAULT_PEER_SHARE_DIVISOR: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLimits {
    pub head_timeout: Duration,
    pub body_timeout: Duration,
    pub idle_timeout: Duration,
    /// How long a response may wait for the client to take a byte of it.
    pub send_timeout: Duration,
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
    pub max_streams_per_connection: u32,
    pub body_buffer_bytes: usize,
    /// Of the budget, what the bodies from one peer address (IPv6: its /64) may hold at once on
    /// one listener.
    pub body_buffer_bytes_per_peer: usize,
    /// Of the budget, what the bodies of one connection (HTTP/2: all its streams) may hold.
    pub body_buffer_bytes_per_connection: usize,
}

/// The default peer share of a budget of `total` bytes: an eighth, but at least
/// [`DEFAULT_MIN_SHARE_BYTES`] (and at most the budget).
pub fn default_peer_share(total: usize) -> usize {
    (total / DEFAULT_PEER_SHARE_DIVISOR)
        .max(DEFAULT_MIN_SHARE_BYTES)
        .min(total)
}

/// The default connection share of a budget of `total` bytes: [`DEFAULT_MIN_SHARE_BYTES`] (at
/// most the budget).
pub fn default_connection_share(total: usize) -> usize {
    DEFAULT_MIN_SHARE_BYTES.min(total)
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            head_timeout: Duration::from_millis(DEFAULT_HEAD_TIMEOUT_MS),
            body_timeout: Duration::from_millis(DEFAULT_BODY_TIMEOUT_MS),
            idle_timeout: Duration::from_millis(DEFAULT_IDLE_TIMEOUT_MS),
            send_timeout: Duration::from_millis(DEFAULT_SEND_TIMEOUT_MS),
            ping_interval: Duration::from_millis(DEFAULT_PING_INTERVAL_MS),
            ping_timeout: Duration::from_millis(DEFAULT_PING_TIMEOUT_MS),
            max_streams_per_connection: DEFAULT_MAX_STREAMS_PER_CONNECTION,
            body_buffer_bytes: DEFAULT_BODY_BUFFER_BYTES,
            body_buffer_bytes_per_peer: default_peer_share(DEFAULT_BODY_BUFFER_BYTES),
            body_buffer_bytes_per_connection: default_connection_share(DEFAULT_BODY_BUFFER_BYTES),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawClients {
    pub(super) head_timeout_ms: Spanned<u64>,
    pub(super) body_timeout_ms: Spanned<u64>,
    pub(super) idle_timeout_ms: Spanned<u64>,
    pub(super) send_timeout_ms: Spanned<u64>,
    pub(super) ping_interval_ms: Spanned<u64>,
    pub(super) ping_timeout_ms: Spanned<u64>,
    pub(super) max_streams_per_connection: Spanned<u32>,
    pub(super) body_buffer_bytes: Spanned<usize>,
    /// Unset: [`default_peer_share`] of whatever `body_buffer_bytes` is.
    pub(super) body_buffer_bytes_per_peer: Option<Spanned<usize>>,
    /// Unset: [`default_connection_share`] of it.
    pub(super) body_buffer_bytes_per_connection: Option<Spanned<usize>>,
}

impl Default for RawClients {
    fn default() -> Self {
        let d = ClientLimits::default();
        let ms = |d: Duration| Spanned::new(0..0, d.as_millis() as u64);
        RawClients {
            head_timeout_ms: ms(d.head_timeout),
            body_timeout_ms: ms(d.body_timeout),
            idle_timeout_ms: ms(d.idle_timeout),
            send_timeout_ms: ms(d.send_timeout),
            ping_interval_ms: ms(d.ping_interval),
            ping_timeout_ms: ms(d.ping_timeout),
            max_streams_per_connection: Spanned::new(0..0, d.max_streams_per_connection),
            body_buffer_bytes: Spanned::new(0..0, d.body_buffer_bytes),
            body_buffer_bytes_per_peer: None,
            body_buffer_bytes_per_connection: None,
        }
    }
}

pub(super) fn clients(raw: &RawClients, invalid: Invalid<'_>) -> Result<ClientLimits, ConfigError> {
    let at_least =
        |name: &str, value: u64, span: std::ops::Range<usize>, min: u64| match value < min {
            true => Err(invalid(
                format!("clients.{name}"),
                span,
                format!("must be at least {min}"),
            )),
            false => Ok(value),
        };
    let ms = |name: &str, value: &Spanned<u64>| {
        at_least(name, *value.get_ref(), value.span(), 1).map(Duration::from_millis)
    };
    let streams = &raw.max_streams_per_connection;
    let budget = &raw.body_buffer_bytes;
    let total = at_least(
        "body_buffer_bytes",
        *budget.get_ref() as u64,
        budget.span(),
        MIN_BODY_BUFFER_BYTES as u64,
    )? as usize;
    // A share is at least one body (else such a body is never read) and at most the budget.
    let share = |name: &str, value: &Spanned<usize>| {
        let n = at_least(
            name,
            *value.get_ref() as u64,
            value.span(),
            ONE_BODY_BYTES as u64,
        )?;
        match n > total as u64 {
            true => Err(invalid(
                format!("clients.{name}"),
                value.span(),
                format!("must be at most body_buffer_bytes ({total})"),
            )),
            false => Ok(n as usize),
        }
    };
    let per_peer = match &raw.body_buffer_bytes_per_peer {
        Some(value) => share("body_buffer_bytes_per_peer", value)?,
        None => default_peer_share(total),
    };
    let per_connection = match &raw.body_buffer_bytes_per_connection {
        Some(value) => share("body_buffer_bytes_per_connection", value)?,
        None => default_connection_share(total),
    };
    Ok(ClientLimits {
        head_timeout: ms("head_timeout_ms", &raw.head_timeout_ms)?,
        body_timeout: ms("body_timeout_ms", &raw.body_timeout_ms)?,
        idle_timeout: ms("idle_timeout_ms", &raw.idle_timeout_ms)?,
        send_timeout: ms("send_timeout_ms", &raw.send_timeout_ms)?,
        ping_interval: ms("ping_interval_ms", &raw.ping_interval_ms)?,
        ping_timeout: ms("ping_timeout_ms", &raw.ping_timeout_ms)?,
        max_streams_per_connection: at_least(
            "max_streams_per_connection",
            u64::from(*streams.get_ref()),
            streams.span(),
            1,
        )? as u32,
        body_buffer_bytes: total,
        body_buffer_bytes_per_peer: per_peer,
        body_buffer_bytes_per_connection: per_connection,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn clients(text: &str) -> Result<super::ClientLimits, String> {
        let text = format!("[clients]\n{text}");
        Config::from_toml_str(&text)
            .map(|c| c.clients)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_shares_default_to_an_eighth_and_two_bodies_within_the_budget() {
        let two_bodies = 2 * super::ONE_BODY_BYTES;
        let d = clients("").expect("valid");
        assert_eq!(d.body_buffer_bytes_per_peer, two_bodies);
        assert_eq!(d.body_buffer_bytes_per_connection, two_bodies);
        let large = clients("body_buffer_bytes = 268435456").expect("valid");
        assert_eq!(large.body_buffer_bytes_per_peer, 32 << 20, "an eighth");
        assert_eq!(large.body_buffer_bytes_per_connection, two_bodies);
        let least = clients("body_buffer_bytes = 8388608").expect("valid");
        assert_eq!(
            least.body_buffer_bytes_per_peer,
            8 << 20,
            "the whole budget"
        );
        assert_eq!(least.body_buffer_bytes_per_connection, 8 << 20);
        let set = clients(
            "body_buffer_bytes_per_peer = 67108864\nbody_buffer_bytes_per_connection = 4259840",
        );
        let set = set.expect("valid");
        assert_eq!(set.body_buffer_bytes_per_peer, 64 << 20);
        assert_eq!(set.body_buffer_bytes_per_connection, super::ONE_BODY_BYTES);
    }

    #[test]
    fn a_share_below_one_body_or_above_the_budget_is_refused() {
        let small = clients("body_buffer_bytes_per_peer = 1048576").expect_err("invalid");
        assert!(
            small.contains("clients.body_buffer_bytes_per_peer"),
            "{small}"
        );
        assert!(small.contains("at least 4259840"), "{small}");
        let large = clients("body_buffer_bytes_per_connection = 134217728").expect_err("invalid");
        assert!(large.contains("at most body_buffer_bytes"), "{large}");
    }
}
