//! Out-of-band progress (docs/progress.md): what a running tool reports about itself ("step 2/5"),
//! carried to the client stream that shows the call, never to the model.
//!
//! Progress comes from the MCP front (`notifications/progress` of a `tools/call` the gateway
//! sent through toolpulse) or from `POST /v1/progress`. A [`ProgressHub`] matches it to an open
//! call of a live stream and delivers it to that stream's inbox; the stream's rewriter renders
//! it per profile. The hub is the only thing the MCP front and the endpoint talk to, so the
//! in-process registry ([`local`]) and the Redis bus ([`bus`], several replicas) are
//! interchangeable. Either way the proxy registers its streams in the in-process registry; the
//! bus observes it and shares what other replicas need.

pub mod bus;
pub mod inbox;
pub mod local;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::metrics::ProgressOutcome;

/// A W3C trace id (the 16 bytes of a `traceparent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

impl TraceId {
    /// The trace id of a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`); `None` when it
    /// is malformed or all zeros.
    pub fn from_traceparent(value: &str) -> Option<TraceId> {
        let mut parts = value.trim().split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // W3C Trace Context: lowercase hex only; all-zero trace and parent ids are invalid.
        let hex = |s: &str, n: usize| {
            s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(parent, 16) {
            return None;
        }
        if parent.bytes().all(|b| b == b'0') {
            return None;
        }
        if !hex(flags, 2) || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let mut id = [0u8; 16];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&trace[2 * i..2 * i + 2], 16).ok()?;
        }
        (id != [0; 16]).then_some(TraceId(id))
    }
}

/// What a request's `traceparent` held, read by [`Traceparent::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traceparent {
    Valid(TraceId),
    /// Invalid, and removed.
    Removed,
    Absent,
}

impl Traceparent {
    const HEADER: &str = "traceparent";

    /// Reads a request's `traceparent` as W3C Trace Context does: one field, as
    /// [`TraceId::from_traceparent`] takes it. An invalid one (uppercase hex, a zero id, two
    /// fields, …) is removed with its `tracestate`, which means nothing without it: the
    /// request then starts a new trace ([`Traceparent::restart`]) instead of carrying a broken
    /// one on. The proxy listener and the MCP front both check what they forward with this.
    pub fn check(headers: &mut http::HeaderMap) -> Traceparent {
        let mut fields = headers.get_all(Self::HEADER).iter();
        let (first, second) = (fields.next(), fields.next());
        let Some(first) = first else {
            return Traceparent::Absent;
        };
        let valid = second
            .is_none()
            .then(|| first.to_str().ok().and_then(TraceId::from_traceparent))
            .flatten();
        match valid {
            Some(id) => Traceparent::Valid(id),
            None => {
                headers.remove(Self::HEADER);
                headers.remove("tracestate");
                Traceparent::Removed
            }
        }
    }

    /// The trace it continues.
    pub fn id(self) -> Option<TraceId> {
        match self {
            Traceparent::Valid(id) => Some(id),
            _ => None,
        }
    }

    /// Starts a new trace: sets a new `traceparent`; its trace id.
    pub fn restart(headers: &mut http::HeaderMap) -> TraceId {
        let (id, value) = TraceId::new_traceparent();
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            headers.insert(Self::HEADER, value);
        }
        id
    }
}

impl TraceId {
    /// A new random trace id and the `traceparent` that carries it (sampled, a random parent
    /// span id).
    pub fn new_traceparent() -> (TraceId, String) {
        let bytes = |n: usize| -> Vec<u8> {
            (0..n.div_ceil(8))
                .flat_map(|_| random_u64().to_be_bytes())
                .take(n)
                .collect()
        };
        let mut id = [0u8; 16];
        id.copy_from_slice(&bytes(16));
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let value = format!("00-{}-{}-01", hex(&id), hex(&bytes(8)));
        (TraceId(id), value)
    }
}

/// 64 random bits: SipHash, keyed from the OS's randomness by `RandomState`, of a counter and
/// the time. Enough for trace ids, which must be unique, not secret; std has no public RNG and
/// this avoids a dependency for it.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    hasher.write_u128(now.map_or(0, |d| d.as_nanos()));
    hasher.finish()
}

/// One progress report, as MCP's `notifications/progress` carries it: the core's value.
pub use crate::core::lifecycle::Progress;

/// A `tools/call` the MCP front forwards, as far as correlation needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolCall {
    /// The configured server's `name`.
    pub server: String,
    /// The tool's name as the gateway's `function_call` items name it (`call_name` applied).
    pub function_name: String,
    /// The call's `arguments` (compared as JSON values with the function_call's).
    pub arguments: Value,
    /// From `params._meta.traceparent`, else the request's `traceparent` header.
    pub trace_id: Option<TraceId>,
}

/// Which open call a `POST /v1/progress` means.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The function_call's `call_id`.
    CallId(String),
    /// The function_call's name, and optionally its arguments, to narrow the match.
    Tool {
        name: String,
        arguments: Option<Value>,
    },
}

/// What became of a progress report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Handed to the stream of exactly one open call.
    Delivered,
    /// No open call matches.
    Unmatched,
    /// Two or more open calls in different streams match equally: delivered to none.
    Ambiguous,
    /// The call it was bound to has already ended.
    Late,
    /// An MCP call not bound yet (its stream may not show it yet): kept, newest only, for up
    /// to `[progress] bind_window_ms`.
    Waiting,
}

impl From<Delivery> for ProgressOutcome {
    fn from(delivery: Delivery) -> ProgressOutcome {
        match delivery {
            Delivery::Delivered => ProgressOutcome::Delivered,
            Delivery::Unmatched => ProgressOutcome::Unmatched,
            Delivery::Ambiguous => ProgressOutcome::Ambiguous,
            Delivery::Late => ProgressOutcome::Late,
            Delivery::Waiting => ProgressOutcome::Waiting,
        }
    }
}

/// An MCP call the hub is following, from `bind` to `release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BindingId(pub u64);

/// The answer to [`ProgressHub::post`]: the bus may have to ask other replicas first.
pub type PostFuture<'a> = Pin<Box<dyn Future<Output = Delivery> + Send + 'a>>;

/// Where progress goes. Cheap to call from any task: it never blocks on a client stream, and
/// `bind`, `progress` and `release` never wait for anything (they are called while an MCP
/// answer is being forwarded).
pub trait ProgressHub: Send + Sync + 'static {
    /// An MCP `tools/call` is being forwarded: the hub binds it to an open call now or within
    /// the bind window; its notifications name the returned id.
    fn bind(&self, call: McpToolCall) -> BindingId;
    /// A `notifications/progress` for a bound (or binding) MCP call.
    fn progress(&self, binding: BindingId, progress: Progress) -> Delivery;
    /// The MCP call was answered (or failed): forget it.
    fn release(&self, binding: BindingId);
    /// `POST /v1/progress`: one report for the call `target` names. The future resolves
    /// within a bounded time (the bus's lookup has a timeout).
    fn post(&self, target: Target, progress: Progress) -> PostFuture<'_>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_from_traceparent() {
        let id =
            TraceId::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(id.map(|t| t.0[0]), Some(0x4b));
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        ] {
            assert_eq!(TraceId::from_traceparent(bad), None, "{bad}");
        }
        let (id, value) = TraceId::new_traceparent();
        assert_eq!(TraceId::from_traceparent(&value), Some(id));
        assert_ne!(TraceId::new_traceparent().0, id);
    }

    #[test]
    fn an_invalid_traceparent_is_removed_with_its_tracestate() {
        let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let headers = |values: &[&str]| {
            let mut headers = http::HeaderMap::new();
            for value in values {
                headers.append("traceparent", value.parse().expect("a value"));
            }
            headers.insert("tracestate", "vendor=1".parse().expect("a value"));
            headers
        };
        let mut one = headers(&[valid]);
        let id = TraceId::from_traceparent(valid).expect("valid");
        assert_eq!(Traceparent::check(&mut one), Traceparent::Valid(id));
        assert_eq!(one.len(), 2, "kept");
        let upper = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01";
        for values in [&[upper][..], &[valid, valid]] {
            let mut sent = headers(values);
            assert_eq!(Traceparent::check(&mut sent), Traceparent::Removed);
            assert!(sent.is_empty(), "{values:?}: {sent:?}");
            let id = Traceparent::restart(&mut sent);
            let value = sent["traceparent"].to_str().expect("ascii");
            assert_eq!(TraceId::from_traceparent(value), Some(id));
        }
        assert_eq!(
            Traceparent::check(&mut http::HeaderMap::new()),
            Traceparent::Absent
        );
    }
}
