//! What one stream's open calls hold, and the limits on it: the caps on names and ids, the
//! per-stream budget (`[limits] max_open_call_bytes`) and the per-call cap on arguments. The
//! tracker keeps [`Held::bytes`] equal to the sum of [`held_by`] over its open calls at every
//! step, by telling [`Held`] of every call it takes and releases; a call left alone is counted
//! once ([`Untracked`]).

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::BuildHasher;

use crate::core::lifecycle::call::{Call, MAX_ARGUMENTS_BYTES};

/// The longest tool name followed. OpenAI allows 64 characters (`^[a-zA-Z0-9_-]{1,64}$`); MCP
/// gateways prefix the server's name (`server__tool`), so four times as much is generous. The
/// log of tools without a rule names tools up to the same length.
pub const MAX_NAME_BYTES: usize = 256;

/// The longest call id or item id followed. Gateways' ids are 20 to 60 bytes (`call_…`,
/// `fc_…`, `toolu_…`); a hosted item's id carries its call id, and is only made for call ids up
/// to the same length.
pub const MAX_ID_BYTES: usize = 256;

/// Calls the tracker left alone for a limit, by limit (their events pass as the upstream sent
/// them), and calls followed without their arguments.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Untracked {
    /// `max_open_calls` calls were open.
    pub open_calls: u64,
    /// Its name was over [`MAX_NAME_BYTES`].
    pub name_bytes: u64,
    /// Its call id or item id was over [`MAX_ID_BYTES`].
    pub id_bytes: u64,
    /// The open calls held `max_held_bytes` (with it, they would have held more).
    pub held_bytes: u64,
    /// Calls followed on without their arguments: they were over [`MAX_ARGUMENTS_BYTES`] or
    /// would have taken the open calls past `max_held_bytes`.
    pub arguments_dropped: u64,
}

impl Untracked {
    /// Calls left alone, whatever the limit.
    pub fn calls(&self) -> u64 {
        self.open_calls + self.name_bytes + self.id_bytes + self.held_bytes
    }

    pub fn any(&self) -> bool {
        self.calls() + self.arguments_dropped > 0
    }

    /// `(label, count)` for each kind of call left alone (the metric's `reason`).
    pub fn by_reason(&self) -> [(&'static str, u64); 4] {
        [
            ("open_calls", self.open_calls),
            ("name_bytes", self.name_bytes),
            ("id_bytes", self.id_bytes),
            ("held_bytes", self.held_bytes),
        ]
    }
}

/// Call ids remembered as left alone per stream (8 bytes each).
pub const MAX_LEFT_ALONE: usize = 4096;

/// Call ids are the upstream's: foldhash's per-process random seed keeps them from being
/// chosen to collide.
type Hasher = foldhash::fast::RandomState;

/// Why a call was left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    OpenCalls,
    NameBytes,
    IdBytes,
    HeldBytes,
}

/// The bytes an open call holds: its strings, the arguments at their allocated size (the
/// rest of a `Call` is a fixed size, bounded by `max_open_calls`).
pub fn held_by(call: &Call) -> usize {
    call.name.len() + call.call_id.len() + call.item_id.len() + call.arguments.capacity()
}

/// What the open calls hold against their budget, and the calls left alone for a limit.
#[derive(Debug, Clone)]
pub(super) struct Held {
    /// What the open calls may hold together ([`held_by`]).
    max_bytes: usize,
    /// What they hold: the sum of [`held_by`] over the open calls, kept as they change.
    bytes: usize,
    /// Calls not tracked for a limit, and calls followed without their arguments.
    pub untracked: Untracked,
    /// The hashes of the call ids left alone, so that a call is counted once however many
    /// events it has; at most [`MAX_LEFT_ALONE`] (later ones are counted at each event).
    left_alone: HashSet<u64, Hasher>,
}

impl Held {
    pub fn new(max_bytes: usize) -> Self {
        Held {
            max_bytes,
            bytes: 0,
            untracked: Untracked::default(),
            left_alone: HashSet::default(),
        }
    }

    /// What the open calls hold now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Leaves call `call_id` alone for `limit`: counted at its first event.
    pub fn leave(&mut self, call_id: &str, limit: Limit) {
        let hash = self.left_alone.hasher().hash_one(call_id);
        if self.left_alone.len() < MAX_LEFT_ALONE {
            if !self.left_alone.insert(hash) {
                return;
            }
        } else if self.left_alone.contains(&hash) {
            return;
        }
        let u = &mut self.untracked;
        *match limit {
            Limit::OpenCalls => &mut u.open_calls,
            Limit::NameBytes => &mut u.name_bytes,
            Limit::IdBytes => &mut u.id_bytes,
            Limit::HeldBytes => &mut u.held_bytes,
        } += 1;
    }

    /// A call is now open, with what it holds.
    pub fn take(&mut self, call: &Call) {
        self.bytes += held_by(call);
    }

    /// An open call is taken out, with what it held.
    pub fn release(&mut self, call: &Call) {
        self.bytes -= held_by(call);
    }

    /// Every open call is taken out.
    pub fn release_all(&mut self) {
        self.bytes = 0;
    }

    /// What the open calls may still take.
    pub fn room(&self) -> usize {
        self.max_bytes.saturating_sub(self.bytes)
    }

    /// Drops open `call`'s arguments (over a limit): it is followed on without them.
    fn drop_arguments(&mut self, call: &mut Call) {
        self.bytes -= call.arguments.capacity();
        call.arguments = String::new();
        if !call.arguments_truncated {
            call.arguments_truncated = true;
            self.untracked.arguments_dropped += 1;
        }
    }

    /// Appends to open `call`'s arguments, within [`MAX_ARGUMENTS_BYTES`] and the stream's
    /// room; false once they are dropped. Grows as `String` does (doubling), but never past
    /// the room: a call near the budget takes only what it needs.
    pub fn append(&mut self, call: &mut Call, text: &str) -> bool {
        if call.arguments_truncated {
            return false;
        }
        let (length, capacity) = (call.arguments.len(), call.arguments.capacity());
        let needed = length + text.len();
        if needed > MAX_ARGUMENTS_BYTES || needed > capacity + self.room() {
            self.drop_arguments(call);
            return false;
        }
        if needed > capacity {
            let grown = needed.max(capacity.saturating_mul(2).min(capacity + self.room()));
            call.arguments.reserve_exact(grown - length);
        }
        call.arguments.push_str(text);
        self.bytes = self.bytes - capacity + call.arguments.capacity();
        true
    }

    /// Replaces open `call`'s arguments with the final ones, held at their length, unless
    /// they are over [`MAX_ARGUMENTS_BYTES`] or the stream's room.
    pub fn set_arguments(&mut self, call: &mut Call, arguments: Cow<'_, str>) {
        self.bytes -= call.arguments.capacity();
        call.arguments = String::new();
        if arguments.len() > MAX_ARGUMENTS_BYTES || arguments.len() > self.room() {
            return self.drop_arguments(call);
        }
        let mut arguments = arguments.into_owned();
        arguments.shrink_to_fit();
        self.bytes += arguments.capacity();
        call.arguments = arguments;
        call.arguments_truncated = false;
    }
}
