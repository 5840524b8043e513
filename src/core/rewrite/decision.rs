//! What happens to one upstream event: the one value the rewriter decides per event and
//! applies in one place (`Rewriter::apply`), as h11 returns one typed event per step.
//!
//! The state machines have taken in what the event means (its calls tracked, its numbers
//! announced) when the decision is made; what is injected for it (the events its transitions
//! render) goes out before or after it, so that closing events precede the output or terminal
//! event that closes them, and opening events follow the item that opens them.

use std::borrow::Cow;
use std::ops::Range;

use crate::core::dialect::responses::{Number, Reading, Skip};

/// What happens to an upstream event, and where the events injected for it go.
#[derive(Debug)]
pub struct Decision<'a> {
    pub fate: Fate<'a>,
    pub inject: Inject,
}

/// What happens to the upstream event itself.
#[derive(Debug)]
pub enum Fate<'a> {
    /// Goes out as it is, not read (nothing needs its numbers); its data is held for its
    /// `sequence_number` should an injection later need the number after it.
    Unread(Cow<'a, [u8]>, Skip),
    /// Goes out as it is, outside the numbering: a comment, an event without data, an event
    /// that cannot be read.
    Unnumbered,
    /// Goes out with its numbers rewritten where they changed and the items spliced into the
    /// `response.output` it lists (its `data`, and where those lie in it).
    Forward(Cow<'a, [u8]>, EventNumbers),
    /// Dropped (an item the presentation hides): its number is given up.
    Drop,
}

/// Whether the events injected for an upstream event go before or after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inject {
    Before,
    After,
}

/// What a presentation decides for an upstream event that was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It goes out (edited where needed), with what is injected for it before or after it.
    Forward(Inject),
    /// It is dropped; what is injected for it takes its place.
    Drop,
}

impl<'a> Decision<'a> {
    /// An event that goes out as it is, outside the numbering (nothing is injected for it).
    pub fn unnumbered() -> Self {
        Decision {
            fate: Fate::Unnumbered,
            inject: Inject::After,
        }
    }

    /// An event that goes out unread, with `data` (nothing is injected for it).
    pub fn unread(data: Cow<'a, [u8]>, skip: Skip) -> Self {
        Decision {
            fate: Fate::Unread(data, skip),
            inject: Inject::After,
        }
    }

    /// The presentation's verdict on an event that was read (`data`, with `numbers`).
    pub fn of(verdict: Verdict, data: Cow<'a, [u8]>, numbers: EventNumbers) -> Self {
        match verdict {
            Verdict::Forward(inject) => Decision {
                fate: Fate::Forward(data, numbers),
                inject,
            },
            Verdict::Drop => Decision {
                fate: Fate::Drop,
                inject: Inject::Before,
            },
        }
    }
}

/// The numbers of an upstream event, and what else a forward may edit in its data.
#[derive(Debug)]
pub struct EventNumbers {
    pub sequence_number: Option<Number>,
    pub output_index: Option<Number>,
    /// Whether it lists the response's output (`response.completed`, …).
    pub lists_output: bool,
    /// Where the event's `response.id` differs from the created one (rule `response_id`).
    pub changed_id: Option<Range<usize>>,
}

impl EventNumbers {
    /// What `reading` says of them; `changed_id` as the response's rules found it.
    pub fn of(reading: &Reading<'_>, changed_id: Option<Range<usize>>) -> Self {
        EventNumbers {
            sequence_number: reading.sequence_number.clone(),
            output_index: reading.output_index.clone(),
            lists_output: reading.lists_output,
            changed_id,
        }
    }
}
