//! The in-process registry of open calls: which live stream shows which running call, and the
//! matching of progress to them (docs/progress.md says them in prose):
//!
//! - by trace: an MCP call carrying the trace id of a stream (the client's `traceparent`, which
//!   the proxy forwards to the gateway) goes to that stream's call of that tool name;
//! - otherwise by name and arguments (compared as JSON values) across all streams; when open
//!   calls in two or more streams match, the report goes to none (never to the wrong user);
//! - an MCP call binds once: its reports follow that decision. One that matches nothing yet
//!   waits up to the bind window (its stream may not show the call yet), keeping the newest
//!   report, delivered once bound.
//!
//! Memory is bounded: open calls are at most the streams' own limits; waiting bindings, bound
//! ones and recently closed calls each have a named limit.
//!
//! With the Redis bus (several replicas) this registry still holds this process's streams and
//! their inboxes: an [`Observer`] is told of every call that opens or closes (the bus registers
//! them), reports from other replicas are put in with [`LocalHub::deliver`], and while the bus
//! is out of reach the bus falls back to the exact matches only ([`LocalHub::bind_exact`],
//! [`LocalHub::post_exact`]): a replica alone cannot see an identical call open elsewhere.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::inbox::{Inbox, Put};
use super::{BindingId, Delivery, McpToolCall, PostFuture, Progress, ProgressHub, Target, TraceId};

mod matching;
mod state;
use matching::{Found, expire, find, remember_closed, was_closed};
pub use state::MAX_RECENTLY_CLOSED;
use state::{Binding, MatchBy, OpenCall, State, Stream};

/// MCP calls followed at once (bound or waiting); past it, new ones are left unbound.
pub const MAX_BINDINGS: usize = 4096;
/// Told of every call that opens or closes in this process's streams. Called on the stream's
/// task, outside the registry's lock: it must not block (the bus queues and returns).
pub trait Observer: Send + Sync + 'static {
    /// `arguments` is `None` when the function_call's arguments are not JSON.
    fn opened(&self, call: OpenedCall<'_>);
    fn closed(&self, stream: u64, call_id: &str);
}

/// A call that has just opened in a stream, as an [`Observer`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct OpenedCall<'a> {
    pub stream: u64,
    pub trace_id: Option<TraceId>,
    pub call_id: &'a str,
    pub name: &'a str,
    pub arguments: Option<&'a Value>,
}

pub struct LocalHub {
    state: Mutex<State>,
    bind_window: Duration,
    next_id: AtomicU64,
    observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for LocalHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalHub")
            .field("bind_window", &self.bind_window)
            .field("observed", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

impl LocalHub {
    pub fn new(bind_window: Duration) -> Arc<Self> {
        Self::build(bind_window, None)
    }

    /// A registry whose calls `observer` is told of as they open and close.
    pub fn observed(bind_window: Duration, observer: Arc<dyn Observer>) -> Arc<Self> {
        Self::build(bind_window, Some(observer))
    }

    fn build(bind_window: Duration, observer: Option<Arc<dyn Observer>>) -> Arc<Self> {
        Arc::new(LocalHub {
            state: Mutex::new(State::default()),
            bind_window,
            next_id: AtomicU64::new(1),
            observer,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A live stream (the client's trace id, if any): its calls can get progress while it lives.
    pub fn stream(self: &Arc<Self>, trace_id: Option<TraceId>) -> StreamHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let inbox = Arc::new(Inbox::default());
        let stream = Stream {
            trace_id,
            inbox: inbox.clone(),
            calls: Vec::new(),
        };
        self.state().streams.insert(id, stream);
        StreamHandle {
            hub: self.clone(),
            id,
            inbox,
        }
    }

    fn open(&self, stream: u64, call: OpenCall, now: Instant) {
        let trace_id = {
            let mut state = self.state();
            let Some(s) = state.streams.get_mut(&stream) else {
                return;
            };
            let trace_id = s.trace_id;
            s.calls.push(call.clone());
            bind_waiting(&mut state, now);
            trace_id
        };
        if let Some(observer) = &self.observer {
            observer.opened(OpenedCall {
                stream,
                trace_id,
                call_id: &call.call_id,
                name: &call.name,
                arguments: call.arguments.as_ref(),
            });
        }
    }
}

/// MCP calls that arrived before their stream showed the call bind now, oldest first.
fn bind_waiting(state: &mut State, now: Instant) {
    {
        let mut waiting: Vec<u64> = state
            .bindings
            .iter()
            .filter(|(_, b)| matches!(b, Binding::Waiting { .. }))
            .map(|(id, _)| *id)
            .collect();
        waiting.sort_unstable();
        for id in waiting {
            let Some(Binding::Waiting {
                call, until, by, ..
            }) = state.bindings.get(&id)
            else {
                continue;
            };
            if *until < now {
                continue;
            }
            let found = find(
                state,
                &call.function_name,
                Some(&call.arguments),
                call.trace_id,
                *by,
            );
            let decided = match found {
                Found::One(stream, call_id) => Binding::Bound { stream, call_id },
                Found::Ambiguous => Binding::Refused(Delivery::Ambiguous),
                Found::None => continue,
            };
            if let Some(Binding::Waiting {
                newest: Some(report),
                ..
            }) = state.bindings.insert(id, decided)
            {
                deliver(state, id, report);
            }
        }
    }
}

impl LocalHub {
    fn close(&self, stream: u64, call_id: &str) {
        {
            let mut state = self.state();
            let Some(s) = state.streams.get_mut(&stream) else {
                return;
            };
            let Some(i) = s.calls.iter().position(|c| c.call_id == call_id) else {
                return;
            };
            let call = s.calls.swap_remove(i);
            remember_closed(&mut state, call);
        }
        if let Some(observer) = &self.observer {
            observer.closed(stream, call_id);
        }
    }

    fn end_stream(&self, stream: u64) {
        let mut closed = Vec::new();
        {
            let mut state = self.state();
            if let Some(s) = state.streams.remove(&stream) {
                for call in s.calls {
                    closed.push(call.call_id.clone());
                    remember_closed(&mut state, call);
                }
            }
        }
        if let Some(observer) = &self.observer {
            for call_id in closed {
                observer.closed(stream, &call_id);
            }
        }
    }

    fn bind_at(&self, call: McpToolCall, now: Instant) -> BindingId {
        self.bind_with(call, MatchBy::TraceOrArguments, now)
    }

    /// Binds `call` by its trace id only (never by name and arguments): what a replica may
    /// decide alone while the bus is out of reach. Without a trace id it stays unbound.
    pub fn bind_exact(&self, call: McpToolCall) -> BindingId {
        self.bind_with(call, MatchBy::TraceOnly, Instant::now())
    }

    fn bind_with(&self, call: McpToolCall, by: MatchBy, now: Instant) -> BindingId {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state();
        expire(&mut state, now);
        if state.bindings.len() >= MAX_BINDINGS {
            return BindingId(id);
        }
        let found = find(
            &state,
            &call.function_name,
            Some(&call.arguments),
            call.trace_id,
            by,
        );
        let binding = match found {
            Found::One(stream, call_id) => Binding::Bound { stream, call_id },
            Found::Ambiguous => Binding::Refused(Delivery::Ambiguous),
            Found::None if was_closed(&state, &call.function_name, Some(&call.arguments)) => {
                Binding::Refused(Delivery::Late)
            }
            Found::None if by == MatchBy::TraceOnly && call.trace_id.is_none() => {
                Binding::Refused(Delivery::Unmatched)
            }
            Found::None => Binding::Waiting {
                call,
                by,
                until: now + self.bind_window,
                newest: None,
            },
        };
        state.bindings.insert(id, binding);
        BindingId(id)
    }

    fn progress_at(&self, binding: BindingId, report: Progress, now: Instant) -> Delivery {
        let mut state = self.state();
        expire(&mut state, now);
        match state.bindings.get_mut(&binding.0) {
            None => Delivery::Unmatched,
            Some(Binding::Refused(why)) => *why,
            Some(Binding::Waiting { newest, .. }) => {
                *newest = Some(report);
                Delivery::Waiting
            }
            Some(Binding::Bound { .. }) => deliver(&mut state, binding.0, report),
        }
    }

    /// `POST /v1/progress` decided here: by `call_id`, or by name (and arguments) under the
    /// ambiguity rule among this process's streams.
    pub fn post_now(&self, target: Target, report: Progress) -> Delivery {
        let mut state = self.state();
        let (found, name, arguments) = match &target {
            Target::CallId(call_id) => (find_call_id(&state, call_id), None, None),
            Target::Tool { name, arguments } => {
                let found = find(
                    &state,
                    name,
                    arguments.as_ref(),
                    None,
                    MatchBy::TraceOrArguments,
                );
                (found, Some(name), arguments.as_ref())
            }
        };
        match found {
            Found::One(stream, call_id) => put(&mut state, stream, &call_id, report),
            Found::Ambiguous => Delivery::Ambiguous,
            Found::None if name.is_some_and(|n| was_closed(&state, n, arguments)) => Delivery::Late,
            Found::None => Delivery::Unmatched,
        }
    }

    /// `POST /v1/progress` while the bus is out of reach: by `call_id` only (exact); a report
    /// naming a tool is not delivered, since an identical call may be open on another replica.
    pub fn post_exact(&self, target: Target, report: Progress) -> Delivery {
        match target {
            Target::CallId(_) => self.post_now(target, report),
            Target::Tool { .. } => Delivery::Unmatched,
        }
    }

    /// A report for the call `call_id` of this process's stream `stream` (from another replica,
    /// which matched it through the bus).
    pub fn deliver(&self, stream: u64, call_id: &str, report: Progress) -> Delivery {
        put(&mut self.state(), stream, call_id, report)
    }
}

impl ProgressHub for LocalHub {
    fn bind(&self, call: McpToolCall) -> BindingId {
        self.bind_at(call, Instant::now())
    }

    fn progress(&self, binding: BindingId, report: Progress) -> Delivery {
        self.progress_at(binding, report, Instant::now())
    }

    fn release(&self, binding: BindingId) {
        self.state().bindings.remove(&binding.0);
    }

    fn post(&self, target: Target, report: Progress) -> PostFuture<'_> {
        Box::pin(std::future::ready(self.post_now(target, report)))
    }
}

/// The streams that show a call `call_id`: exactly one, or ambiguous.
fn find_call_id(state: &State, call_id: &str) -> Found {
    let mut streams = state
        .streams
        .iter()
        .filter(|(_, s)| s.calls.iter().any(|c| c.call_id == call_id))
        .map(|(id, _)| *id);
    match (streams.next(), streams.next()) {
        (None, _) => Found::None,
        (Some(one), None) => Found::One(one, call_id.to_string()),
        (Some(_), Some(_)) => Found::Ambiguous,
    }
}

fn deliver(state: &mut State, binding: u64, report: Progress) -> Delivery {
    let Some(Binding::Bound { stream, call_id }) = state.bindings.get(&binding) else {
        return Delivery::Unmatched;
    };
    let (stream, call_id) = (*stream, call_id.clone());
    put(state, stream, &call_id, report)
}

/// Into the inbox of `stream`, if the call is still open there.
fn put(state: &mut State, stream: u64, call_id: &str, report: Progress) -> Delivery {
    let Some(s) = state.streams.get(&stream) else {
        return Delivery::Late;
    };
    if !s.calls.iter().any(|c| c.call_id == call_id) {
        return Delivery::Late;
    }
    match s.inbox.put(call_id, report) {
        Put::Queued | Put::Replaced => Delivery::Delivered,
        Put::Full => Delivery::Unmatched,
    }
}

/// A stream's registration: its calls are reported through it, and it ends when dropped.
#[derive(Debug)]
pub struct StreamHandle {
    hub: Arc<LocalHub>,
    id: u64,
    pub inbox: Arc<Inbox>,
}

impl StreamHandle {
    /// The stream's call `call_id` runs now (its arguments complete).
    pub fn call_running(&self, call_id: &str, name: &str, arguments: &str) {
        let call = OpenCall {
            call_id: call_id.to_string(),
            name: name.to_string(),
            arguments: serde_json::from_str(arguments).ok(),
        };
        self.hub.open(self.id, call, Instant::now());
    }

    /// The stream's id in this registry (an observer's `stream`).
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn call_finished(&self, call_id: &str) {
        self.hub.close(self.id, call_id);
    }
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        self.hub.end_stream(self.id);
    }
}

#[cfg(test)]
mod tests;
