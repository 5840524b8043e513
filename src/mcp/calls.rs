//! The MCP calls the front follows, from the forwarded `tools/call` to its response: which
//! progress token names which [`BindingId`] of the hub.
//!
//! A notification may arrive on the POST's own answer stream or on the session's GET stream, so
//! the tokens live in one [`Registry`] per front, bounded by [`MAX_BOUND_CALLS`]; each POST owns
//! its calls through a [`Calls`] value that releases them on the response or, at the latest,
//! when it is dropped (answer done, client gone, upstream failed). toolpulse's tokens are
//! unguessable and so keyed alone; a gateway's tokens are only unique within its session, so
//! they are keyed with the server and the `Mcp-Session-Id`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::jsonrpc::{Token, ToolCall};
use crate::metrics::Metrics;
use crate::progress::{BindingId, McpToolCall, Progress, ProgressHub, TraceId};

/// MCP calls followed at once by one front; further calls are forwarded without a token of
/// toolpulse's and without progress.
pub const MAX_BOUND_CALLS: usize = 4096;
/// `tools/call` requests followed per POST (a batch may hold more; those are not followed).
pub const MAX_CALLS_PER_REQUEST: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Ours(String),
    Theirs {
        server: String,
        session: Option<String>,
        token: String,
    },
}

/// Every token the front follows now.
#[derive(Default)]
pub struct Registry {
    tokens: Mutex<HashMap<Key, BindingId>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, BindingId>> {
        self.tokens
            .lock()
            .expect("registry lock is never poisoned: no panics while held")
    }

    /// How many more calls may be followed.
    pub fn room(&self) -> usize {
        MAX_BOUND_CALLS.saturating_sub(self.lock().len())
    }

    fn insert(&self, key: Key, binding: BindingId) -> bool {
        let mut tokens = self.lock();
        if tokens.len() >= MAX_BOUND_CALLS {
            return false;
        }
        // A gateway reusing a token in one session: the newer call takes it over.
        tokens.insert(key, binding);
        true
    }

    fn get(&self, key: &Key) -> Option<BindingId> {
        self.lock().get(key).copied()
    }

    /// Forgets `key` unless another call has taken it over meanwhile.
    fn remove(&self, key: &Key, binding: BindingId) {
        let mut tokens = self.lock();
        if tokens.get(key) == Some(&binding) {
            tokens.remove(key);
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
    metrics: Arc<Metrics>,
    server: String,
    session: Option<String>,
    /// This request's calls: the JSON-RPC id, the token's key, the binding.
    open: Vec<(String, Key, BindingId)>,
}

impl Calls {
    pub fn new(
        hub: Arc<dyn ProgressHub>,
        registry: Arc<Registry>,
        metrics: Arc<Metrics>,
        server: String,
        session: Option<String>,
    ) -> Self {
        Calls {
            hub,
            registry,
            metrics,
            server,
            session,
            open: Vec::new(),
        }
    }

    fn key(&self, token: &Value) -> Key {
        match token.as_str() {
            Some(t) if super::token::looks_ours(token) => Key::Ours(t.to_string()),
            _ => Key::Theirs {
                server: self.server.clone(),
                session: self.session.clone(),
                token: token.to_string(),
            },
        }
    }

    /// Binds a forwarded `tools/call` at the hub. `function_name` has `call_name` applied;
    /// `header_trace` is the request's `traceparent` header (the call's `_meta` one wins).
    pub fn bind(&mut self, call: ToolCall, function_name: String, header_trace: Option<TraceId>) {
        let key = match &call.token {
            Token::Ours(t) => Key::Ours(t.clone()),
            Token::Theirs(t) => self.key(t),
        };
        let trace_id = call
            .traceparent
            .as_deref()
            .and_then(TraceId::from_traceparent)
            .or(header_trace);
        let binding = self.hub.bind(McpToolCall {
            server: self.server.clone(),
            function_name,
            arguments: call.arguments,
            trace_id,
        });
        if !self.registry.insert(key.clone(), binding) {
            self.hub.release(binding);
            return;
        }
        self.metrics.mcp_bound_calls.inc();
        self.open.push((call.id, key, binding));
    }

    /// A `notifications/progress` from the server: handed to the hub if its token is followed.
    pub fn progress(&self, token: &Value, progress: Progress) -> Seen {
        let key = self.key(token);
        if let Some(binding) = self.registry.get(&key) {
            let delivery = self.hub.progress(binding, progress);
            self.metrics.progress("mcp", delivery);
        }
        match key {
            Key::Ours(_) => Seen::Consumed,
            Key::Theirs { .. } => Seen::Forward,
        }
    }

    /// The response to the request `id` (JSON text) went by: its call is over.
    pub fn answered(&mut self, id: &str) {
        if let Some(i) = self.open.iter().position(|(open, ..)| open == id) {
            let (_, key, binding) = self.open.swap_remove(i);
            self.release(&key, binding);
        }
    }

    /// How many of this request's calls are still open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn release(&self, key: &Key, binding: BindingId) {
        self.registry.remove(key, binding);
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
