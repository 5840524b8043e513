//! The `[clients]` section: what every client connection of the proxy, MCP and admin listeners
//! gets, so that no client holds a connection or memory for long (see [`crate::listen`]).
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
//! ```

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

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
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawClients {
    head_timeout_ms: Spanned<u64>,
    body_timeout_ms: Spanned<u64>,
    idle_timeout_ms: Spanned<u64>,
    send_timeout_ms: Spanned<u64>,
    ping_interval_ms: Spanned<u64>,
    ping_timeout_ms: Spanned<u64>,
    max_streams_per_connection: Spanned<u32>,
    body_buffer_bytes: Spanned<usize>,
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
        }
    }
}

type Invalid<'a> = &'a dyn Fn(String, std::ops::Range<usize>, String) -> super::ConfigError;

pub(super) fn clients(
    raw: &RawClients,
    invalid: Invalid<'_>,
) -> Result<ClientLimits, super::ConfigError> {
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
        body_buffer_bytes: at_least(
            "body_buffer_bytes",
            *budget.get_ref() as u64,
            budget.span(),
            MIN_BODY_BUFFER_BYTES as u64,
        )? as usize,
    })
}
