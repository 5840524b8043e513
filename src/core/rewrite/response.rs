//! What the rewriter keeps about the current response, all of it dropped at once when the next
//! `response.created` starts another (a connection may carry several): its id, its output
//! indices as the client sees them, its items for the item rules, and its presentation.

use std::ops::Range;

use super::decision::EventNumbers;
use super::index::OutputIndices;
use super::present::Presentation;
use super::report::{Observation, Report};
use super::splice::{Edit, Splice};
use super::stream::Stream;
use crate::core::dialect::responses::{Number, Reading};
use crate::core::rules::Rule;
use crate::core::rules::items::Items;

#[derive(Debug)]
pub struct Response {
    /// Responses started in the stream, this one included; 0 before the first
    /// `response.created` (events before it belong to the response it opens).
    pub ordinal: u64,
    /// The nonce of this response's hosted ids ([`response_nonce`]).
    pub nonce: u64,
    /// The id `response.created` gave it: the one every later event of it must carry (a
    /// gateway that changes it breaks [`Rule::ResponseId`]).
    id: Option<String>,
    pub indices: OutputIndices,
    /// The upstream's items, for the item rules.
    items: Items,
    pub presentation: Presentation,
}

impl Response {
    /// The `ordinal`th response of `stream`, before any of its events.
    pub fn new(ordinal: u64, stream: &Stream) -> Self {
        Response {
            ordinal,
            nonce: response_nonce(stream.nonce, ordinal),
            id: None,
            indices: OutputIndices::default(),
            items: Items::default(),
            presentation: Presentation::new(stream),
        }
    }

    /// Counts the item rules an upstream event breaks and follows the response's id; returns
    /// where the event's `response.id` must be mended ([`Rule::ResponseId`]).
    pub fn follow_rules(
        &mut self,
        reading: &Reading<'_>,
        report: &mut Report,
    ) -> Option<Range<usize>> {
        let violations = &mut report.stats.violations;
        match (&reading.output_index, reading.item_head) {
            (Some(index), Some(item)) => self.items.item(index.value, item, violations),
            (Some(index), None) => self.items.named(index.value, violations),
            (None, _) => {}
        }
        let id = reading.response_id.as_ref();
        if reading.starts_response {
            self.id = id.map(|id| id.value.to_string());
            return None;
        }
        let (id, shown) = (id?, self.id.as_ref()?);
        if *shown == id.value {
            return None;
        }
        // The gateway's id is observed, so the next turn's `previous_response_id` can be
        // mapped back to it.
        report.stats.violations.count(Rule::ResponseId);
        let observation = Observation::ResponseId {
            shown: shown.clone(),
            upstream: id.value.to_string(),
        };
        report.observe(observation);
        Some(id.span.clone())
    }

    /// An event that names the item at upstream index `index` and means nothing else: the
    /// item rules count it as [`Response::follow_rules`] does.
    pub fn named(&self, index: u64, report: &mut Report) {
        self.items.named(index, &mut report.stats.violations);
    }

    /// The edits of a forwarded event's `data`: its numbers where they changed (`new`: its
    /// new `sequence_number` and `output_index`), the items the presentation lists in the
    /// `response.output` it lists, and the created id where the gateway changed it.
    pub fn edits(
        &self,
        data: &[u8],
        numbers: EventNumbers,
        new: (Option<u64>, Option<u64>),
        edits: &mut Vec<Edit>,
    ) {
        if numbers.lists_output {
            self.presentation.listing(data, edits);
        }
        let mut digits = |number: Option<Number>, new: Option<u64>| {
            if let (Some(old), Some(new)) = (number, new)
                && new != old.value
            {
                edits.push((old.span, Splice::Number(new)));
            }
        };
        digits(numbers.sequence_number, new.0);
        digits(numbers.output_index, new.1);
        if let (Some(span), Some(id)) = (numbers.changed_id, &self.id) {
            let id = serde_json::Value::from(id.as_str()).to_string();
            edits.push((span, Splice::Text(id)));
        }
    }
}

/// The nonce of the stream's `ordinal`th response: the stream's own for the first, then a
/// mix of both (splitmix64's finalizer), as unlikely to meet another stream's as two random
/// nonces are. A gateway that numbers call ids per response so cannot make two hosted items
/// with one id.
fn response_nonce(nonce: u64, ordinal: u64) -> u64 {
    if ordinal <= 1 {
        return nonce;
    }
    let mut z = nonce ^ ordinal.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
