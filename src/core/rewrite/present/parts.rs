//! What a presentation decides from, besides its own state: the meaning of the upstream event
//! ([`Step`]) and the rewriter's other parts, lent for the step ([`Parts`]).

use std::borrow::Cow;
use std::time::Instant;

use crate::core::dialect::responses::Reading;
use crate::core::lifecycle::{Signal, Tracker, Transition};
use crate::core::rewrite::index::OutputIndices;
use crate::core::rewrite::report::Report;
use crate::core::rewrite::stream::Stream;
use crate::core::settings::Settings;

/// What an upstream event that was read means.
pub struct Step<'a> {
    pub signal: Option<Signal<'a>>,
    /// The raw JSON of the item of an `output_item.added`/`.done`.
    pub item: Option<&'a str>,
    /// Its upstream `output_index`.
    pub index: Option<u64>,
    /// The `item_id` of an event without an `output_index`.
    pub item_id: Option<Cow<'a, str>>,
}

impl<'a> Step<'a> {
    pub fn of(reading: Reading<'a>) -> Self {
        Step {
            index: reading.output_index.as_ref().map(|n| n.value),
            signal: reading.signal,
            item: reading.item,
            item_id: reading.item_id,
        }
    }
}

/// The rewriter's parts a presentation works with.
pub struct Parts<'a> {
    pub settings: &'a Settings,
    pub stream: &'a Stream,
    /// The nonce of the current response's hosted ids.
    pub nonce: u64,
    pub tracker: &'a mut Tracker,
    /// The current response's `output_index`es as the client sees them.
    pub indices: &'a mut OutputIndices,
    /// The transitions to render for this step.
    pub transitions: &'a mut Vec<Transition>,
    pub report: &'a mut Report,
    pub now: Instant,
}

impl Parts<'_> {
    /// Tracks what `signal` means for the calls; its transitions are rendered for this step.
    pub fn track(&mut self, signal: Signal<'_>) {
        let settings = self.settings;
        let (classifier, failure) = (&settings.classifier, &settings.failure);
        (self.tracker).on_signal(signal, self.now, classifier, failure, self.transitions);
    }
}
