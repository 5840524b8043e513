//! The hosted items of the current response (profile `hosted`): which upstream indices are
//! hidden (a hosted call's `function_call` item and the `function_call_output` folded into its
//! hosted item), the calls shown so, and the gateway's own items of each call, kept until its
//! output arrives so that the pair can be handed to the next-turn store.
//!
//! Memory: at most [`MAX_HOSTED_CALLS`] calls per response (later calls are left as the gateway
//! sent them), and at most [`MAX_PAIR_BYTES`] of a call's item JSON held.

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
    /// Upstream `output_index`es whose events are dropped.
    hidden: Vec<u64>,
    calls: Vec<HostedCall>,
    /// Call ids this response has shown (hosted or not), at most [`MAX_SEEN_CALLS`]: a call id
    /// is hosted only at its first sighting.
    seen: Vec<String>,
}

/// Call ids remembered per response; past that no new call is hosted.
pub const MAX_SEEN_CALLS: usize = 4 * MAX_HOSTED_CALLS;

#[derive(Debug, Clone)]
struct HostedCall {
    call_id: String,
    /// The `function_call` item as the gateway sent it done (for the store).
    call_item: Option<String>,
}

impl HostedItems {
    /// A new response starts.
    pub fn reset(&mut self) {
        self.hidden.clear();
        self.calls.clear();
        self.seen.clear();
    }

    /// Call id `call_id` has been shown in this response.
    pub fn see(&mut self, call_id: &str) {
        if !self.was_seen(call_id) && self.seen.len() < MAX_SEEN_CALLS {
            self.seen.push(call_id.to_string());
        }
    }

    /// Whether call id `call_id` was shown before in this response (or too many were).
    pub fn was_seen(&self, call_id: &str) -> bool {
        self.seen.len() >= MAX_SEEN_CALLS || self.seen.iter().any(|c| c == call_id)
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
        self.hidden.contains(&index)
    }

    /// Whether call `call_id` is shown as a hosted item in this response.
    pub fn contains(&self, call_id: &str) -> bool {
        self.calls.iter().any(|c| c.call_id == call_id)
    }

    /// Call `call_id`, whose `function_call` item is at upstream index `index`, is hosted.
    pub fn open(&mut self, call_id: &str, index: u64) {
        self.hide(index);
        self.calls.push(HostedCall {
            call_id: call_id.to_string(),
            call_item: None,
        });
    }

    /// Events at upstream index `index` are dropped from now on.
    pub fn hide(&mut self, index: u64) {
        if !self.hidden.contains(&index) {
            self.hidden.push(index);
        }
    }

    /// Keeps the gateway's `function_call` item of hosted call `call_id`.
    pub fn keep_call_item(&mut self, call_id: &str, item: &str) {
        if let Some(call) = self.calls.iter_mut().find(|c| c.call_id == call_id) {
            call.call_item = (item.len() <= MAX_PAIR_BYTES).then(|| item.to_string());
        }
    }

    /// Hands over the kept `function_call` item of `call_id` (its output arrived).
    pub fn take_call_item(&mut self, call_id: &str) -> Option<String> {
        let call = self.calls.iter_mut().find(|c| c.call_id == call_id)?;
        call.call_item.take()
    }

    /// The edit of an event's data that lists the response's output: each hosted call's
    /// `function_call` replaced by its hosted item (from `items`), its `function_call_output`
    /// left out. `None` when nothing changes or the list cannot be read.
    pub fn listing(&self, data: &[u8], items: &Companions) -> Option<(Range<usize>, Splice)> {
        let listing = responses::listed_items(data)?;
        let mut changed = false;
        let mut text = String::with_capacity(listing.span.len());
        text.push('[');
        for item in &listing.items {
            let json = &data[item.span.clone()];
            let hosted = item.call_id.as_deref().filter(|id| self.contains(id));
            let replacement = match (item.kind, hosted) {
                (responses::ListedKind::Call, Some(call_id)) => items.get(call_id),
                _ => None,
            };
            let hidden = matches!(
                (item.kind, hosted),
                (responses::ListedKind::Output, Some(_))
            );
            if hidden {
                changed = true;
                continue;
            }
            if text.len() > 1 {
                text.push(',');
            }
            match replacement {
                Some(replacement) => {
                    changed = true;
                    text.push_str(replacement);
                }
                // Listed items are slices of valid UTF-8 data.
                None => text.push_str(&String::from_utf8_lossy(json)),
            }
        }
        text.push(']');
        changed.then_some((listing.span, Splice::Text(text)))
    }
}
