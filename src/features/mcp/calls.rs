//! The MCP calls the front follows, from the forwarded `tools/call` to its response: which
//! progress token names which [`BindingId`] of the hub.
//!
//! A notification on a POST's own answer stream belongs to that POST's calls: it is matched
//! among them alone ([`Calls::progress`]), so no other request can take it over. A notification
//! on a session's GET stream is matched through the front's [`Registry`] (bounded by
//! [`MAX_BOUND_CALLS`]): toolpulse's tokens are unguessable and so keyed alone; a gateway's
//! tokens are only unique within its session, so they are keyed with the server and the
//! `Mcp-Session-Id`, and a key two open calls share names neither (a gateway reusing a token,
//! or two stateless clients with the same request ids): progress is lost, never crossed. Each
//! POST owns its calls through a [`Calls`] value that releases them on the response or, at the
//! latest, when it is dropped (answer done, client gone, upstream failed).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::jsonrpc::{Token, ToolCall};
use crate::features::progress::{BindingId, McpToolCall, Progress, ProgressHub, TraceId};
use crate::metrics::{Metrics, ProgressSource, Unfollowed};

/// MCP calls followed at once by one front; further calls are forwarded without a token of
/// toolpulse's and without progress.
pub const MAX_BOUND_CALLS: usize = 4096;
/// `tools/call` requests followed per POST (a batch may hold more; those are not followed).
pub const MAX_CALLS_PER_REQUEST: usize = 64;
/// Calls one client connection may have followed at once: a sixteenth of the registry, so
/// that one connection (or a few) cannot take progress away from every other; its further
/// calls are forwarded without being followed.
pub const MAX_CALLS_PER_CONNECTION: usize = MAX_BOUND_CALLS / 16;

/// The calls one client connection has followed now.
#[derive(Debug, Default)]
pub struct Share(AtomicUsize);

impl Share {
    /// How many more calls the connection may have followed.
    pub fn room(&self) -> usize {
        MAX_CALLS_PER_CONNECTION.saturating_sub(self.0.load(Ordering::Relaxed))
    }

    fn take(&self) -> bool {
        let taken = self.0.fetch_add(1, Ordering::AcqRel);
        if taken >= MAX_CALLS_PER_CONNECTION {
            self.0.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    fn give_back(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Ours(String),
    Theirs {
        server: String,
        session: Option<String>,
        token: String,
    },
}

/// The calls open under one key. Once two shared it, it names none until all are over: the
/// one left may not be the one that was named.
#[derive(Debug, Clone, Copy)]
struct Slot {
    binding: Option<BindingId>,
    calls: usize,
}

/// Every token the front follows now.
#[derive(Default)]
pub struct Registry {
    tokens: Mutex<HashMap<Key, Slot>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Slot>> {
        self.tokens
            .lock()
            .expect("registry lock is never poisoned: no panics while held")
    }

    /// How many more calls may be followed.
    pub fn room(&self) -> usize {
        MAX_BOUND_CALLS.saturating_sub(self.lock().len())
    }

    /// Follows `binding` under `key`; false when the registry is full. A key already taken
    /// stays taken, by both calls: it then names neither.
    fn insert(&self, key: Key, binding: BindingId) -> bool {
        let mut tokens = self.lock();
        if tokens.len() >= MAX_BOUND_CALLS {
            return false;
        }
        match tokens.entry(key) {
            Entry::Vacant(slot) => {
                slot.insert(Slot {
                    binding: Some(binding),
                    calls: 1,
                });
            }
            Entry::Occupied(mut slot) => {
                let slot = slot.get_mut();
                slot.calls += 1;
                slot.binding = None;
            }
        }
        true
    }

    /// The binding `key` names, if one call alone holds it.
    fn get(&self, key: &Key) -> Option<BindingId> {
        self.lock().get(key).and_then(|slot| slot.binding)
    }

    /// One call under `key` is over.
    fn remove(&self, key: &Key) {
        let mut tokens = self.lock();
        if let Entry::Occupied(mut slot) = tokens.entry(key.clone()) {
            slot.get_mut().calls -= 1;
            if slot.get().calls == 0 {
                slot.remove();
            }
        }
    }
}

/// What became of a progress notification on its way through the front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// For one of toolpulse's tokens: not forwarded.
    Consumed,
    /// For the gateway's token, or a token the front does not follow: forwarded.
    Forward,
}

/// The context of one forwarded request: its server and session, and the calls it made.
pub struct Calls {
    hub: Arc<dyn ProgressHub>,
    registry: Arc<Registry>,
    /// The client connection's share of the registry.
    share: Arc<Share>,
    metrics: Arc<Metrics>,
    server: String,
    session: Option<String>,
    /// This request's calls: the JSON-RPC id, the token's key, the binding.
    open: Vec<(String, Key, BindingId)>,
    /// The tokens toolpulse gave this request's calls, answered ones too: their late
    /// notifications are still not the gateway's. At most [`MAX_CALLS_PER_REQUEST`].
    issued: Vec<String>,
}

impl Calls {
    pub fn new(
        hub: Arc<dyn ProgressHub>,
        registry: Arc<Registry>,
        share: Arc<Share>,
        metrics: Arc<Metrics>,
        server: String,
        session: Option<String>,
    ) -> Self {
        Calls {
            hub,
            registry,
            share,
            metrics,
            server,
            session,
            open: Vec::new(),
            issued: Vec::new(),
        }
    }

    fn theirs(&self, token: &Value) -> Key {
        Key::Theirs {
            server: self.server.clone(),
            session: self.session.clone(),
            token: token.to_string(),
        }
    }

    /// Binds a forwarded `tools/call` at the hub. `function_name` has `call_name` applied;
    /// `header_trace` is the request's `traceparent` header (the call's `_meta` one wins).
    pub fn bind(&mut self, call: ToolCall, function_name: String, header_trace: Option<TraceId>) {
        let key = match &call.token {
            Token::Ours(t) => Key::Ours(t.clone()),
            Token::Theirs(t) => self.theirs(t),
        };
        let trace_id = call
            .traceparent
            .as_deref()
            .and_then(TraceId::from_traceparent)
            .or(header_trace);
        if !self.share.take() {
            self.metrics.mcp_unfollowed(Unfollowed::ConnectionShare, 1);
            return;
        }
        let binding = self.hub.bind(McpToolCall {
            server: self.server.clone(),
            function_name,
            arguments: call.arguments,
            trace_id,
        });
        if !self.registry.insert(key.clone(), binding) {
            self.hub.release(binding);
            self.share.give_back();
            self.metrics.mcp_unfollowed(Unfollowed::RegistryFull, 1);
            return;
        }
        if let Key::Ours(token) = &key {
            self.issued.push(token.clone());
        }
        self.metrics.mcp_bound_calls.inc();
        self.open.push((call.id, key, binding));
    }

    /// A `notifications/progress` from the server, on this request's answer stream (for a
    /// POST) or its session's GET stream: handed to the hub if its token names one call.
    /// Only this request's own calls are looked at when it made any, so a token another
    /// request uses too never carries progress across; a GET stream (no calls of its own)
    /// looks in the registry. Consumed when toolpulse gave the token.
    pub fn progress(&self, token: &Value, progress: Progress) -> Seen {
        let ours = token.as_str().filter(|t| {
            self.issued.iter().any(|issued| issued == t)
                || self.registry.get(&Key::Ours(t.to_string())).is_some()
        });
        let key = match ours {
            Some(t) => Key::Ours(t.to_string()),
            None => self.theirs(token),
        };
        let binding = match self.issued.is_empty() && self.open.is_empty() {
            true => self.registry.get(&key),
            false => self.own(&key),
        };
        if let Some(binding) = binding {
            let delivery = self.hub.progress(binding, progress);
            self.metrics
                .progress(ProgressSource::Mcp, delivery.into(), 1);
        }
        match key {
            Key::Ours(_) => Seen::Consumed,
            Key::Theirs { .. } => Seen::Forward,
        }
    }

    /// The binding of this request's one open call under `key` (none when several share it).
    fn own(&self, key: &Key) -> Option<BindingId> {
        let mut named = self.open.iter().filter(|(_, k, _)| k == key);
        match (named.next(), named.next()) {
            (Some((.., binding)), None) => Some(*binding),
            _ => None,
        }
    }

    /// The response to the request `id` (JSON text) went by: its call is over.
    pub fn answered(&mut self, id: &str) {
        if let Some(i) = self.open.iter().position(|(open, ..)| open == id) {
            let (_, key, binding) = self.open.swap_remove(i);
            self.release(&key, binding);
        }
    }

    /// How many more calls the request's connection may have followed.
    pub fn share_room(&self) -> usize {
        self.share.room()
    }

    /// How many of this request's calls are still open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn release(&self, key: &Key, binding: BindingId) {
        self.registry.remove(key);
        self.share.give_back();
        self.hub.release(binding);
        self.metrics.mcp_bound_calls.dec();
    }
}

impl Drop for Calls {
    fn drop(&mut self) {
        for (_, key, binding) in std::mem::take(&mut self.open) {
            self.release(&key, binding);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use serde_json::json;

    use super::*;
    use crate::features::progress::{Delivery, PostFuture, Target};

    /// Records which binding each progress went to.
    #[derive(Default)]
    struct Hub {
        next: AtomicU64,
        delivered: Mutex<Vec<(BindingId, String)>>,
    }

    impl ProgressHub for Hub {
        fn bind(&self, _call: McpToolCall) -> BindingId {
            BindingId(self.next.fetch_add(1, Ordering::SeqCst))
        }
        fn progress(&self, binding: BindingId, progress: Progress) -> Delivery {
            let message = progress.message.unwrap_or_default();
            self.delivered
                .lock()
                .expect("lock")
                .push((binding, message));
            Delivery::Delivered
        }
        fn release(&self, _binding: BindingId) {}
        fn post(&self, _target: Target, _progress: Progress) -> PostFuture<'_> {
            Box::pin(std::future::ready(Delivery::Unmatched))
        }
    }

    fn calls(hub: &Arc<Hub>, registry: &Arc<Registry>, session: Option<&str>) -> Calls {
        let metrics = Arc::new(Metrics::new());
        let session = session.map(str::to_string);
        let (hub, registry) = (hub.clone(), registry.clone());
        Calls::new(
            hub,
            registry,
            Arc::default(),
            metrics,
            "srv".into(),
            session,
        )
    }

    fn call(id: u64, token: Token) -> ToolCall {
        ToolCall {
            id: id.to_string(),
            tool: "steps".into(),
            arguments: json!({}),
            token,
            traceparent: None,
        }
    }

    fn note(message: &str) -> Progress {
        Progress {
            progress: 1.0,
            total: None,
            message: Some(message.into()),
        }
    }

    fn delivered(hub: &Hub) -> Vec<(BindingId, String)> {
        std::mem::take(&mut *hub.delivered.lock().expect("lock"))
    }

    #[test]
    fn a_token_two_requests_share_goes_to_the_request_whose_stream_carried_it() {
        let (hub, registry) = (Arc::new(Hub::default()), Arc::default());
        let one = Token::Theirs(json!(1));
        let mut alice = calls(&hub, &registry, None);
        alice.bind(call(1, one.clone()), "steps".into(), None);
        let mut bob = calls(&hub, &registry, None);
        bob.bind(call(1, one), "steps".into(), None);
        let (a, b) = (alice.open[0].2, bob.open[0].2);

        assert_eq!(alice.progress(&json!(1), note("alice")), Seen::Forward);
        assert_eq!(bob.progress(&json!(1), note("bob")), Seen::Forward);
        assert_eq!(delivered(&hub), [(a, "alice".into()), (b, "bob".into())]);

        // A stream without calls of its own (a GET stream) finds the key taken twice: neither.
        let get = calls(&hub, &registry, None);
        get.progress(&json!(1), note("?"));
        drop(alice);
        get.progress(&json!(1), note("?"));
        assert_eq!(delivered(&hub), [], "progress lost, never crossed");
        drop(bob);
        let mut carol = calls(&hub, &registry, None);
        carol.bind(call(1, Token::Theirs(json!(1))), "steps".into(), None);
        get.progress(&json!(1), note("carol"));
        assert_eq!(delivered(&hub), [(carol.open[0].2, "carol".into())]);
    }

    #[test]
    fn a_session_get_stream_reaches_its_sessions_call_and_toolpulses_tokens() {
        let (hub, registry) = (Arc::new(Hub::default()), Arc::default());
        let mut post = calls(&hub, &registry, Some("s1"));
        post.bind(call(1, Token::Theirs(json!("gw-1"))), "steps".into(), None);
        post.bind(call(2, Token::Ours("tp-x".into())), "steps".into(), None);
        let (theirs, ours) = (post.open[0].2, post.open[1].2);
        let get = calls(&hub, &registry, Some("s1"));
        let other_session = calls(&hub, &registry, Some("s2"));
        assert_eq!(get.progress(&json!("gw-1"), note("a")), Seen::Forward);
        assert_eq!(get.progress(&json!("tp-x"), note("b")), Seen::Consumed);
        assert_eq!(
            other_session.progress(&json!("gw-1"), note("c")),
            Seen::Forward
        );
        assert_eq!(delivered(&hub), [(theirs, "a".into()), (ours, "b".into())]);
    }

    #[test]
    fn a_token_is_toolpulses_because_toolpulse_gave_it_not_by_its_shape() {
        let (hub, registry) = (Arc::new(Hub::default()), Arc::default());
        let shaped = format!("tp-{}", "ab".repeat(16));
        let mut post = calls(&hub, &registry, Some("s1"));
        post.bind(call(1, Token::Theirs(json!(shaped))), "steps".into(), None);
        post.bind(
            call(2, Token::Ours("tp-given".into())),
            "steps".into(),
            None,
        );
        assert_eq!(post.progress(&json!(shaped), note("a")), Seen::Forward);
        assert_eq!(post.progress(&json!("tp-given"), note("b")), Seen::Consumed);
        // Answered: a late notification for toolpulse's token is still not the gateway's.
        post.answered("2");
        assert_eq!(post.progress(&json!("tp-given"), note("c")), Seen::Consumed);
        assert_eq!(delivered(&hub).len(), 2);
    }
}
