//! The MCP calls this replica follows with the bus: what each one is bound to, and the report
//! kept while it is not bound yet.
//!
//! A binding starts `Looking` (the bind script runs off the caller's task), may go `Waiting`
//! (recorded in Redis; another replica's register script will tell us), and ends decided:
//! `Here` (a stream of this replica), `There` (another replica's), `Local` (the bus failed: the
//! in-process registry's exact rule decides) or `Refused`. A decision that arrives for a binding
//! already decided or released is ignored, so the order of the script's reply and a message on
//! the channel does not matter.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::keys::Owner;
use crate::features::progress::{BindingId, Delivery, McpToolCall, Progress};

/// MCP calls followed at once through the bus; past it, new ones are left unbound.
pub const MAX_BUS_BINDINGS: usize = 4096;

#[derive(Debug)]
pub enum State {
    Looking {
        call: McpToolCall,
        newest: Option<Progress>,
    },
    Waiting {
        call: McpToolCall,
        until: Instant,
        newest: Option<Progress>,
    },
    Here {
        stream: u64,
        call_id: String,
    },
    There(Owner),
    Local(BindingId),
    Refused(Delivery),
}

/// What a decision resolved to.
#[derive(Debug)]
pub enum Decision {
    One(Owner),
    Ambiguous,
    /// Nothing open yet: wait for the call (only from `Looking`).
    Wait(Duration),
    /// The bus failed: decide locally.
    Fallback,
}

/// Where a report goes, decided under the lock and carried out after it.
#[derive(Debug)]
pub enum Route {
    Here(u64, String),
    There(Owner),
    Local(BindingId),
    Kept,
    Done(Delivery),
}

/// What to do once a decision is recorded: fall back (with the call), and the kept report.
#[derive(Debug, Default)]
pub struct Decided {
    pub fallback: Option<McpToolCall>,
    pub newest: Option<Progress>,
}

#[derive(Default)]
pub struct Bindings {
    map: Mutex<HashMap<u64, State>>,
}

impl Bindings {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, State>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a new binding; false when there are too many.
    pub fn insert(&self, id: u64, state: State) -> bool {
        let mut map = self.map();
        if map.len() >= MAX_BUS_BINDINGS {
            return false;
        }
        map.insert(id, state);
        true
    }

    pub fn remove(&self, id: u64) -> Option<State> {
        self.map().remove(&id)
    }

    /// Records `decision` for a binding not decided yet; `replica` is this process's id.
    pub fn decide(&self, id: u64, decision: Decision, replica: &str) -> Decided {
        let mut map = self.map();
        let Some(state) = map.get_mut(&id) else {
            return Decided::default();
        };
        let (call, newest) = match state {
            State::Looking { call, newest } => (call, newest.take()),
            State::Waiting { .. } if matches!(decision, Decision::Wait(_)) => {
                return Decided::default();
            }
            State::Waiting { call, newest, .. } => (call, newest.take()),
            _ => return Decided::default(),
        };
        let mut decided = Decided {
            fallback: None,
            newest,
        };
        *state = match decision {
            Decision::One(owner) if owner.replica == replica => State::Here {
                stream: owner.stream,
                call_id: owner.call_id,
            },
            Decision::One(owner) => State::There(owner),
            Decision::Ambiguous => State::Refused(Delivery::Ambiguous),
            Decision::Wait(window) => State::Waiting {
                call: call.clone(),
                until: Instant::now() + window,
                newest: decided.newest.take(),
            },
            Decision::Fallback => {
                decided.fallback = Some(call.clone());
                // Replaced by `Local` once the in-process registry has bound it.
                State::Refused(Delivery::Unmatched)
            }
        };
        decided
    }

    /// The fallback binding of `id` in the in-process registry.
    pub fn set_local(&self, id: u64, local: BindingId) -> bool {
        match self.map().get_mut(&id) {
            Some(state) => {
                *state = State::Local(local);
                true
            }
            None => false,
        }
    }

    /// Where a report for `id` goes (kept, when not bound yet).
    pub fn route(&self, id: u64, report: Progress) -> (Route, Option<Progress>) {
        let mut map = self.map();
        let Some(state) = map.get_mut(&id) else {
            return (Route::Done(Delivery::Unmatched), None);
        };
        match state {
            State::Waiting { until, .. } if *until < Instant::now() => {
                *state = State::Refused(Delivery::Unmatched);
                (Route::Done(Delivery::Unmatched), None)
            }
            State::Looking { newest, .. } | State::Waiting { newest, .. } => {
                *newest = Some(report);
                (Route::Kept, None)
            }
            State::Here { stream, call_id } => {
                (Route::Here(*stream, call_id.clone()), Some(report))
            }
            State::There(owner) => (Route::There(owner.clone()), Some(report)),
            State::Local(local) => (Route::Local(*local), Some(report)),
            State::Refused(why) => (Route::Done(*why), None),
        }
    }
}
