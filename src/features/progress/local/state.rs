//! The registry's state, behind its one lock: the live streams with their open calls, the
//! bindings of MCP calls (bound, waiting, or refused) and the calls closed lately.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::features::progress::inbox::Inbox;
use crate::features::progress::{Delivery, McpToolCall, Progress, TraceId};

/// Closed calls remembered, to tell a late report from an unmatched one.
pub const MAX_RECENTLY_CLOSED: usize = 256;

#[derive(Debug, Clone)]
pub(super) struct OpenCall {
    pub(super) call_id: String,
    pub(super) name: String,
    /// The function_call's arguments, when they are JSON.
    pub(super) arguments: Option<Value>,
}

#[derive(Debug)]
pub(super) struct Stream {
    pub(super) trace_id: Option<TraceId>,
    pub(super) inbox: Arc<Inbox>,
    pub(super) calls: Vec<OpenCall>,
}

#[derive(Debug)]
pub(super) enum Binding {
    Bound {
        stream: u64,
        call_id: String,
    },
    Waiting {
        call: McpToolCall,
        by: MatchBy,
        until: Instant,
        newest: Option<Progress>,
    },
    /// Decided: no delivery (ambiguous, late, or the wait ran out).
    Refused(Delivery),
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) streams: HashMap<u64, Stream>,
    pub(super) bindings: HashMap<u64, Binding>,
    /// (name, arguments) of calls that closed lately.
    pub(super) closed: VecDeque<(String, Option<Value>)>,
}

/// How a binding may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MatchBy {
    /// By trace id, else by name and arguments under the ambiguity rule (the normal rule).
    TraceOrArguments,
    /// By trace id only: a replica that cannot reach the bus cannot apply the ambiguity rule
    /// across replicas, so it delivers only what is exact.
    TraceOnly,
}
