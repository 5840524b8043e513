//! The hosted items of the current response (profile `hosted`): which upstream indices are
//! hidden (a hosted call's `function_call` item and the `function_call_output` folded into its
//! hosted item), the calls shown so, and the gateway's own items of each call, kept until its
//! output arrives so that the pair can be handed to the next-turn store.
//!
//! Memory: at most [`MAX_HOSTED_CALLS`] calls per response (later calls are left as the gateway
//! sent them). Of a call's item JSON only a [`Shell`] is held, at most [`MAX_SHELL_BYTES`], and
//! only while the call is open: its arguments, the bulk of it, are the call's own (held once,
//! by the tracker) and put back when the pair goes to the store. Call ids and item ids over the
//! tracker's cap ([`MAX_ID_BYTES`]) are never remembered: no call with one is hosted.

use std::collections::{HashMap, HashSet};

use super::shown::Shown;
use crate::core::dialect::listing;
use crate::core::lifecycle::track::MAX_ID_BYTES;
use crate::core::rewrite::splice::{Edit, Splice};

/// Calls shown as hosted items per response; later ones pass as they are.
pub const MAX_HOSTED_CALLS: usize = 1024;

/// The largest [`Shell`] held for the store: the item's JSON but its arguments (its type, ids,
/// name and status take a few hundred bytes).
pub const MAX_SHELL_BYTES: usize = 4096;

/// The gateway's `function_call` item as it sent it done, without the value of its `arguments`
/// (which the call holds): `text` with the arguments' JSON string to go in at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shell {
    text: String,
    /// Where the arguments go; `None`: the item had none (it is whole).
    at: Option<usize>,
}

impl Shell {
    /// The shell of `item` (an item's JSON), if it is at most [`MAX_SHELL_BYTES`].
    pub fn of(item: &str) -> Option<Shell> {
        let span = listing::arguments_span(item);
        let cut = span.as_ref().map_or(0, |s| s.len());
        if item.len() - cut > MAX_SHELL_BYTES {
            return None;
        }
        Some(match span {
            Some(span) => Shell {
                text: [&item[..span.start], &item[span.end..]].concat(),
                at: Some(span.start),
            },
            None => Shell {
                text: item.to_string(),
                at: None,
            },
        })
    }

    /// The item with `arguments` (the call's, the ones the item had) put back, as a JSON
    /// string: the same JSON value the gateway sent.
    pub fn with_arguments(&self, arguments: &str) -> String {
        let Some(at) = self.at else {
            return self.text.clone();
        };
        let quoted = serde_json::to_string(arguments).expect("a string serializes");
        [&self.text[..at], &quoted, &self.text[at..]].concat()
    }

    /// The bytes it holds.
    pub fn bytes(&self) -> usize {
        self.text.len()
    }
}

#[derive(Debug, Default, Clone)]
pub struct HostedItems {
    /// Upstream `output_index`es whose events are dropped, sorted: looked up for every event
    /// while any is hidden.
    hidden: Vec<u64>,
    /// The hosted calls by call id, each with the shell of the `function_call` item as the
    /// gateway sent it done (for the store) until its output takes it or the call ends.
    calls: HashMap<Box<str>, Option<Shell>, Hasher>,
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
    /// Call id `call_id` has been shown in this response.
    pub fn see(&mut self, call_id: &str) {
        if call_id.len() <= MAX_ID_BYTES
            && self.seen.len() < MAX_SEEN_CALLS
            && !self.seen.contains(call_id)
        {
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
        if item_id.len() <= MAX_ID_BYTES && self.natives.len() < MAX_HOSTED_CALLS {
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
        if item_id.len() <= MAX_ID_BYTES && self.hidden_ids.len() < MAX_SEEN_CALLS {
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

    /// Keeps the shell of the gateway's `function_call` item of hosted call `call_id`.
    pub fn keep_call_item(&mut self, call_id: &str, item: &str) {
        if let Some(call_item) = self.calls.get_mut(call_id) {
            *call_item = Shell::of(item);
        }
    }

    /// Hands over the kept shell of `call_id`'s item (its output arrived), or lets it go (the
    /// call ended without one).
    pub fn take_call_item(&mut self, call_id: &str) -> Option<Shell> {
        self.calls.get_mut(call_id)?.take()
    }

    /// The bytes the kept shells hold.
    pub fn shell_bytes(&self) -> usize {
        self.calls.values().flatten().map(Shell::bytes).sum()
    }

    /// The edit of an event's data that lists the response's output: each hosted call's
    /// `function_call` (or the gateway's own hosted item for it, whichever comes first) replaced
    /// by its hosted item (from `items`), the other and its `function_call_output` left out.
    /// `None` when nothing changes or the list cannot be read.
    pub fn listing(&self, data: &[u8], items: &Shown) -> Option<Edit> {
        let listing = listing::listed_items(data)?;
        let mut changed = false;
        let mut text = String::with_capacity(listing.span.len());
        text.push('[');
        // A call's item goes where the first of its items was listed (the gateway's
        // `function_call` or its own hosted item), once.
        let mut placed: Vec<&str> = Vec::new();
        for item in &listing.items {
            let json = &data[item.span.clone()];
            let call_id = match item.kind {
                listing::ListedKind::Call | listing::ListedKind::Output => {
                    item.call_id.as_deref().filter(|id| self.contains(id))
                }
                listing::ListedKind::Hosted => {
                    item.id.as_deref().and_then(|id| self.native_call(id))
                }
                listing::ListedKind::Other => None,
            };
            let shown = match (item.kind, call_id) {
                (_, None) => Some(json_text(json)),
                (listing::ListedKind::Output, Some(_)) => None,
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
