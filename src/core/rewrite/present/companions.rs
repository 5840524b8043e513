//! Presentation `openai`: a companion item beside each call a profile shows, added when the
//! call starts running at an index above every index the response has used (the output
//! indices move later items up), and listed right after its `function_call` wherever an
//! event lists the response's output.

use super::shown::Shown;
use crate::core::lifecycle::{Phase, Tracker, Transition};
use crate::core::profiles::openai;
use crate::core::rewrite::index::OutputIndices;
use crate::core::rewrite::splice::Edit;

/// The companions of the current response.
#[derive(Debug, Default)]
pub struct Companions {
    pub shown: Shown,
}

impl Companions {
    /// Gives a call that starts running its companion's index, unless its call id already had
    /// one in this response or the limits are reached.
    pub fn open(
        &mut self,
        transition: &mut Transition,
        indices: &mut OutputIndices,
        tracker: &mut Tracker,
    ) {
        let call = &mut transition.call;
        if transition.phase != Phase::Running
            || call.companion.is_some()
            || !openai::shows(call.kind)
            || self.shown.contains(&call.call_id)
        {
            return;
        }
        if let Some(index) = indices.open_companion() {
            call.companion = Some(index);
            tracker.set_companion(&call.call_id, index);
        }
    }

    /// The edits of an event's data that lists the response's output: each companion after
    /// its `function_call`.
    pub fn listing(&self, data: &[u8], edits: &mut Vec<Edit>) {
        if !self.shown.is_empty() {
            self.shown.insertions(data, edits);
        }
    }
}
