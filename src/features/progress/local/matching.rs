//! Which open call of this process's streams a report means (the rules of the module above),
//! and the small bookkeeping around it: recently closed calls, waiting bindings that ran out.

use std::time::Instant;

use serde_json::Value;

use super::state::{Binding, MAX_RECENTLY_CLOSED, MatchBy, OpenCall, State};
use crate::features::progress::{Delivery, TraceId};

/// What a match found.
pub(super) enum Found {
    One(u64, String),
    Ambiguous,
    None,
}

/// The open call `name`/`arguments` (and `trace`) means, under the ambiguity rule.
pub(super) fn find(
    state: &State,
    name: &str,
    arguments: Option<&Value>,
    trace: Option<TraceId>,
    by: MatchBy,
) -> Found {
    let matches =
        |c: &OpenCall| c.name == name && arguments.is_none_or(|a| c.arguments.as_ref() == Some(a));
    if let Some(trace) = trace {
        // A trace id is the client's: two streams may carry the same one. One stream with a
        // call of the tool decides (its arguments pick among parallel calls); several must be
        // singled out by the arguments, else nobody gets the report.
        let mut streams = 0;
        let (mut first, mut exact, mut exact_streams) = (None, None, 0);
        for (id, s) in state
            .streams
            .iter()
            .filter(|(_, s)| s.trace_id == Some(trace))
        {
            let Some(call) = s.calls.iter().find(|c| c.name == name) else {
                continue;
            };
            streams += 1;
            first.get_or_insert((*id, call));
            if let Some(call) = s.calls.iter().find(|c| matches(c)) {
                exact_streams += 1;
                exact = Some((*id, call));
            }
        }
        let one = match (streams, exact_streams) {
            (0, _) => None,
            (_, 1) => exact,
            (1, 0) => first,
            _ => return Found::Ambiguous,
        };
        if let Some((stream, call)) = one {
            return Found::One(stream, call.call_id.clone());
        }
    }
    if by == MatchBy::TraceOnly {
        return Found::None;
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

pub(super) fn remember_closed(state: &mut State, call: OpenCall) {
    if state.closed.len() >= MAX_RECENTLY_CLOSED {
        state.closed.pop_front();
    }
    state.closed.push_back((call.name, call.arguments));
}

pub(super) fn was_closed(state: &State, name: &str, arguments: Option<&Value>) -> bool {
    state
        .closed
        .iter()
        .any(|(n, a)| n == name && arguments.is_none_or(|x| a.as_ref() == Some(x)))
}

/// Waiting bindings whose window has passed are refused (unmatched).
pub(super) fn expire(state: &mut State, now: Instant) {
    for binding in state.bindings.values_mut() {
        if let Binding::Waiting { until, .. } = binding
            && *until < now
        {
            *binding = Binding::Refused(Delivery::Unmatched);
        }
    }
}
