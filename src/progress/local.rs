//! The in-process registry of open calls: which live stream shows which running call, and the
//! matching of progress to them (PRODUCT.md §6, issue 16's correlation rules):
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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::inbox::{Inbox, Put};
use super::{BindingId, Delivery, McpToolCall, Progress, ProgressHub, Target, TraceId};

/// MCP calls followed at once (bound or waiting); past it, new ones are left unbound.
pub const MAX_BINDINGS: usize = 4096;
/// Closed calls remembered, to tell a late report from an unmatched one.
pub const MAX_RECENTLY_CLOSED: usize = 256;

#[derive(Debug)]
struct OpenCall {
    call_id: String,
    name: String,
    /// The function_call's arguments, when they are JSON.
    arguments: Option<Value>,
}

#[derive(Debug)]
struct Stream {
    trace_id: Option<TraceId>,
    inbox: Arc<Inbox>,
    calls: Vec<OpenCall>,
}

#[derive(Debug)]
enum Binding {
    Bound {
        stream: u64,
        call_id: String,
    },
    Waiting {
        call: McpToolCall,
        until: Instant,
        newest: Option<Progress>,
    },
    /// Decided: no delivery (ambiguous, late, or the wait ran out).
    Refused(Delivery),
}

#[derive(Debug, Default)]
struct State {
    streams: HashMap<u64, Stream>,
    bindings: HashMap<u64, Binding>,
    /// (name, arguments) of calls that closed lately.
    closed: VecDeque<(String, Option<Value>)>,
}

/// What a match found.
enum Found {
    One(u64, String),
    Ambiguous,
    None,
}

#[derive(Debug)]
pub struct LocalHub {
    state: Mutex<State>,
    bind_window: Duration,
    next_id: AtomicU64,
}

impl LocalHub {
    pub fn new(bind_window: Duration) -> Arc<Self> {
        Arc::new(LocalHub {
            state: Mutex::new(State::default()),
            bind_window,
            next_id: AtomicU64::new(1),
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
        let mut state = self.state();
        let Some(s) = state.streams.get_mut(&stream) else {
            return;
        };
        s.calls.push(call);
        // MCP calls that arrived first bind now, oldest first.
        let mut waiting: Vec<u64> = state
            .bindings
            .iter()
            .filter(|(_, b)| matches!(b, Binding::Waiting { .. }))
            .map(|(id, _)| *id)
            .collect();
        waiting.sort_unstable();
        for id in waiting {
            let Some(Binding::Waiting { call, until, .. }) = state.bindings.get(&id) else {
                continue;
            };
            if *until < now {
                continue;
            }
            let found = find(
                &state,
                &call.function_name,
                Some(&call.arguments),
                call.trace_id,
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
                deliver(&mut state, id, report);
            }
        }
    }

    fn close(&self, stream: u64, call_id: &str) {
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

    fn end_stream(&self, stream: u64) {
        let mut state = self.state();
        if let Some(s) = state.streams.remove(&stream) {
            for call in s.calls {
                remember_closed(&mut state, call);
            }
        }
    }

    fn bind_at(&self, call: McpToolCall, now: Instant) -> BindingId {
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
        );
        let binding = match found {
            Found::One(stream, call_id) => Binding::Bound { stream, call_id },
            Found::Ambiguous => Binding::Refused(Delivery::Ambiguous),
            Found::None if was_closed(&state, &call.function_name, Some(&call.arguments)) => {
                Binding::Refused(Delivery::Late)
            }
            Found::None => Binding::Waiting {
                call,
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

    fn post(&self, target: Target, report: Progress) -> Delivery {
        let mut state = self.state();
        let (found, name, arguments) = match &target {
            Target::CallId(call_id) => {
                let streams: Vec<u64> = state
                    .streams
                    .iter()
                    .filter(|(_, s)| s.calls.iter().any(|c| c.call_id == *call_id))
                    .map(|(id, _)| *id)
                    .collect();
                let found = match streams[..] {
                    [] => Found::None,
                    [one] => Found::One(one, call_id.clone()),
                    _ => Found::Ambiguous,
                };
                (found, None, None)
            }
            Target::Tool { name, arguments } => {
                let found = find(&state, name, arguments.as_ref(), None);
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
}

/// The open call `name`/`arguments` (and `trace`) means, under the ambiguity rule.
fn find(state: &State, name: &str, arguments: Option<&Value>, trace: Option<TraceId>) -> Found {
    let matches =
        |c: &OpenCall| c.name == name && arguments.is_none_or(|a| c.arguments.as_ref() == Some(a));
    if let Some(trace) = trace {
        let traced = state
            .streams
            .iter()
            .filter(|(_, s)| s.trace_id == Some(trace))
            .find_map(|(id, s)| s.calls.iter().find(|c| c.name == name).map(|c| (*id, c)));
        if let Some((stream, call)) = traced {
            // Within the stream, the arguments pick among parallel calls of one tool.
            let s = &state.streams[&stream];
            let exact = s.calls.iter().find(|c| matches(c)).unwrap_or(call);
            return Found::One(stream, exact.call_id.clone());
        }
    }
    let mut found = Found::None;
    for (id, s) in &state.streams {
        if let Some(call) = s.calls.iter().find(|c| matches(c)) {
            if matches!(found, Found::One(..)) {
                return Found::Ambiguous;
            }
            found = Found::One(*id, call.call_id.clone());
        }
    }
    found
}

fn remember_closed(state: &mut State, call: OpenCall) {
    if state.closed.len() >= MAX_RECENTLY_CLOSED {
        state.closed.pop_front();
    }
    state.closed.push_back((call.name, call.arguments));
}

fn was_closed(state: &State, name: &str, arguments: Option<&Value>) -> bool {
    state
        .closed
        .iter()
        .any(|(n, a)| n == name && arguments.is_none_or(|x| a.as_ref() == Some(x)))
}

/// Waiting bindings whose window has passed are refused (unmatched).
fn expire(state: &mut State, now: Instant) {
    for binding in state.bindings.values_mut() {
        if let Binding::Waiting { until, .. } = binding
            && *until < now
        {
            *binding = Binding::Refused(Delivery::Unmatched);
        }
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
