//! What becomes of one upstream event ([`Decision`]): read when anything needs it read, its
//! meaning taken in by the tracker and the response, then decided by the presentation.
//!
//! Most events of a stream mean nothing to toolpulse but their numbers (text deltas). While
//! numbers shift, such an event is read for them alone ([`responses::read_numbers`]) and
//! decided in a few steps ([`Rewriter::decide_numbers`]): those of the whole way that an
//! event without a signal, an item or a response takes (no response starts, no call is
//! tracked, only the item rules follow its index, and a presentation drops it only at an index
//! it hides). Both ways give the same output (tested).

use std::borrow::Cow;
use std::time::Instant;

use super::Rewriter;
use super::decision::{Decision, EventNumbers, Inject, Verdict};
use super::present::parts::{Parts, Step};
use crate::core::dialect::responses::{self, Numbers, Reading};
use crate::core::sse::Event;

impl Rewriter {
    /// What becomes of `event`: read when anything needs it read, its meaning taken in by the
    /// tracker and the response, then decided by the presentation.
    pub(super) fn decide<'e>(&mut self, event: &'e Event, now: Instant) -> Decision<'e> {
        let Some(data) = event.data() else {
            // Comments, `id`/`retry`-only blocks, stray blank lines.
            return Decision::unnumbered();
        };
        // Numbers are followed while they shift, and while a call is open: its closing events
        // (at a heartbeat, at EOF) take the number after the last one.
        let must_read = self.numbering.is_shifting()
            || self.response.indices.is_shifting()
            || self.response.presentation.must_read()
            || !self.tracker.open_calls().is_empty()
            || self.out.is_resuming();
        let skip = match event.event_type() {
            Some(line) if !must_read => responses::may_skip(line, &data),
            _ => None,
        };
        if let Some(skip) = skip {
            // Not read, so its `output_index` is not seen: every item is introduced by an
            // `output_item.added`/`.done`, which is always read, so the highest index seen is
            // the highest item's (scanning every event for its index cost ~20 % of the
            // text-only throughput).
            return Decision::unread(data, skip);
        }
        let reading = match responses::read_numbers(&data) {
            Ok(Some(numbers)) if !self.stream.reads_whole() => {
                return self.decide_numbers(data, numbers);
            }
            Ok(Some(numbers)) => Ok(Reading::from(numbers)),
            Ok(None) => responses::read_full(&data),
            Err(unreadable) => Err(unreadable),
        };
        let Ok(reading) = reading else {
            self.report.stats.unreadable += 1;
            return Decision::unnumbered();
        };
        if reading.starts_response {
            self.next_response(now);
        }
        let changed_id = self.response.follow_rules(&reading, &mut self.report);
        self.begin_upstream(reading.sequence_number.as_ref().map(|n| n.value));
        let numbers = EventNumbers::of(&reading, changed_id);
        let step = Step::of(reading);
        let response = &mut self.response;
        let mut parts = Parts {
            settings: &self.settings,
            stream: &self.stream,
            nonce: response.nonce,
            tracker: &mut self.tracker,
            indices: &mut response.indices,
            transitions: &mut self.scratch.transitions,
            report: &mut self.report,
            now,
        };
        let verdict = response.presentation.decide(step, &mut parts);
        Decision::of(verdict, data, numbers)
    }

    /// The decision for an event read for its `numbers` alone, as the whole way makes it for
    /// a [`Reading`] of them: the item rules follow its index, its number is announced, and it
    /// goes out unless the presentation hides its index (nothing is injected for it).
    fn decide_numbers<'e>(&mut self, data: Cow<'e, [u8]>, numbers: Numbers) -> Decision<'e> {
        let index = numbers.output_index.as_ref().map(|n| n.value);
        if let Some(index) = index {
            self.response.named(index, &mut self.report);
        }
        self.begin_upstream(numbers.sequence_number.as_ref().map(|n| n.value));
        let hidden = index.is_some_and(|i| self.response.presentation.hides(i));
        let verdict = match hidden {
            true => Verdict::Drop,
            false => Verdict::Forward(Inject::After),
        };
        let numbers = EventNumbers {
            sequence_number: numbers.sequence_number,
            output_index: numbers.output_index,
            lists_output: false,
            changed_id: None,
        };
        Decision::of(verdict, data, numbers)
    }

    /// Announces the upstream event about to be decided, numbered `number` or not.
    fn begin_upstream(&mut self, number: Option<u64>) {
        match number {
            Some(n) => {
                self.out.forget_unread();
                self.numbering.begin(Some(n));
            }
            None => self.begin_unnumbered(),
        }
    }
}

#[cfg(test)]
mod tests;
