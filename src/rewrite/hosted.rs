//! The hosted items of the current response (profile `hosted`): which upstream indices are
//! hidden (a hosted call's `function_call` item and the `function_call_output` folded into its
//! hosted item), the calls shown so, and the gateway's own items of each call, kept until its
//! output arrives so that the pair can be handed to the next-turn store.
//!
//! Memory: at most [`MAX_HOSTED_CALLS`] calls per response (later calls are left as the gateway
//! sent them), and at most [`MAX_PAIR_BYTES`] of a call's item JSON held.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use super::Splice;
use super::companions::Companions;
use crate::dialect::responses;

/// Calls shown as hosted items per response; later ones pass as they are.
pub const MAX_HOSTED_CALLS: usize = 1024;

/// The largest `function_call` item JSON held for the store (arguments are capped at 1 MiB).
pub const MAX_PAIR_BYTES: usize = (1 << 20) + 4096;

#[derive(Debug, Default, Clone)]
pub struct HostedItems {
    /// Upstream `output_index`es whose events are dropped, sorted: looked up for every event
    /// while any is hidden.
    hidden: Vec<u64>,
    /// The hosted calls by call id, each with the `function_call` item as the gateway sent it
    /// done (for the store) until its output takes it.
    calls: HashMap<Box<str>, Option<String>, Hasher>,
    /// Call ids this response has shown (hosted or not), at most [`MAX_SEEN_CALLS`]: a call id
    /// is hosted only at its first sighting.
    seen: HashSet<Box<str>, Hasher>,
    /// The gateway's own hosted items folded into a call's (item id → call id), one per call.
    natives: HashMap<Box<str>, Box<str>, Hasher>,
    /// The item ids of the hidden items (hosted calls' `function_call`s, folded native items),
    /// for events that name their item without an `output_index`; at most [`MAX_SEEN_CALLS`].
    hidden_ids: HashSet<Box<str>, Hasher>,
}

/// Keys are call ids, which an upstream chooses: foldhash's per-process random seed keeps them
/// from being chosen to collide.
type Hasher = foldhash::fast::RandomState;

/// Call ids remembered per response; past that no new call is hosted.
pub const MAX_SEEN_CALLS: usize = 4 * MAX_HOSTED_CALLS;

impl HostedItems {
    /// A new response starts.
    pub fn reset(&mut self) {
        self.hidden.clear();
        self.calls.clear();
        self.seen.clear();
        self.natives.clear();
        self.hidden_ids.clear();
    }

    /// Call id `call_id` has been shown in this response.
    pub fn see(&mut self, call_id: &str) {
        if self.seen.len() < MAX_SEEN_CALLS && !self.seen.contains(call_id) {
            self.seen.insert(call_id.into());
        }
    }

    /// Whether call id `call_id` was shown before in this response (or too many were).
    pub fn was_seen(&self, call_id: &str) -> bool {
        self.seen.len() >= MAX_SEEN_CALLS || self.seen.contains(call_id)
    }

    /// Whether any event may have to be dropped (so every event must be read).
    pub fn is_active(&self) -> bool {
        !self.hidden.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.calls.len() >= MAX_HOSTED_CALLS
    }

    /// Whether events at upstream index `index` are dropped.
    pub fn hides(&self, index: u64) -> bool {
        self.hidden.binary_search(&index).is_ok()
    }

    /// Whether call `call_id` is shown as a hosted item in this response.
    pub fn contains(&self, call_id: &str) -> bool {
        self.calls.contains_key(call_id)
    }

    /// The call whose item the gateway's own hosted item `item_id` was folded into.
    pub fn native_call(&self, item_id: &str) -> Option<&str> {
        self.natives.get(item_id).map(|c| &**c)
    }

    /// Whether a native item of the gateway's was folded into call `call_id`'s.
    pub fn has_native(&self, call_id: &str) -> bool {
        self.natives.values().any(|c| &**c == call_id)
    }

    /// The gateway's own hosted item `item_id` is folded into hosted call `call_id`'s.
    pub fn fold_native(&mut self, item_id: &str, call_id: &str) {
        if self.natives.len() < MAX_HOSTED_CALLS {
            self.natives.insert(item_id.into(), call_id.into());
        }
    }

    /// Call `call_id`, whose `function_call` item `item_id` is at upstream index `index`, is
    /// hosted.
    pub fn open(&mut self, call_id: &str, item_id: &str, index: u64) {
        self.hide(index);
        self.hide_item(item_id);
        self.calls.insert(call_id.into(), None);
    }

    /// Events naming item `item_id` (without an `output_index`) are dropped from now on.
    pub fn hide_item(&mut self, item_id: &str) {
        if self.hidden_ids.len() < MAX_SEEN_CALLS {
            self.hidden_ids.insert(item_id.into());
        }
    }

    /// Whether events naming item `item_id` (without an `output_index`) are dropped.
    pub fn hides_item(&self, item_id: &str) -> bool {
        self.hidden_ids.contains(item_id)
    }

    /// Events at upstream index `index` are dropped from now on.
    pub fn hide(&mut self, index: u64) {
        if let Err(at) = self.hidden.binary_search(&index) {
            self.hidden.insert(at, index);
        }
    }

    /// Keeps the gateway's `function_call` item of hosted call `call_id`.
    pub fn keep_call_item(&mut self, call_id: &str, item: &str) {
        if let Some(call_item) = self.calls.get_mut(call_id) {
            *call_item = (item.len() <= MAX_PAIR_BYTES).then(|| item.to_string());
        }
    }

    /// Hands over the kept `function_call` item of `call_id` (its output arrived).
    pub fn take_call_item(&mut self, call_id: &str) -> Option<String> {
        self.calls.get_mut(call_id)?.take()
    }

    /// The edit of an event's data that lists the response's output: each hosted call's
    /// `function_call` (or the gateway's own hosted item for it, whichever comes first) replaced
    /// by its hosted item (from `items`), the other and its `function_call_output` left out. `None` when nothing changes or the list cannot be read.
    pub fn listing(&self, data: &[u8], items: &Companions) -> Option<(Range<usize>, Splice)> {
        let listing = responses::listed_items(data)?;
        let mut changed = false;
        let mut text = String::with_capacity(listing.span.len());
        text.push('[');
        // A call's item goes where the first of its items was listed (the gateway's
        // `function_call` or its own hosted item), once.
        let mut placed: Vec<&str> = Vec::new();
        for item in &listing.items {
            let json = &data[item.span.clone()];
            let call_id = match item.kind {
                responses::ListedKind::Call | responses::ListedKind::Output => {
                    item.call_id.as_deref().filter(|id| self.contains(id))
                }
                responses::ListedKind::Hosted => {
                    item.id.as_deref().and_then(|id| self.native_call(id))
                }
                responses::ListedKind::Other => None,
            };
            let shown = match (item.kind, call_id) {
                (_, None) => Some(json_text(json)),
                (responses::ListedKind::Output, Some(_)) => None,
                (_, Some(call_id)) if placed.contains(&call_id) => None,
                (_, Some(call_id)) => {
                    placed.push(call_id);
                    // Without a kept item (past its bound) the gateway's stays.
                    items.get(call_id).map(Into::into).or(Some(json_text(json)))
                }
            };
            changed |= call_id.is_some();
            if let Some(shown) = shown {
                if text.len() > 1 {
                    text.push(',');
                }
                text.push_str(&shown);
            }
        }
        text.push(']');
        changed.then_some((listing.span, Splice::Text(text)))
    }
}

/// A listed item's JSON (a slice of valid UTF-8 data).
fn json_text(json: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(json)
}
