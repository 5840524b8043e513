//! Presentations: how a stream shows the calls it carries, which decides what becomes of each
//! upstream event (forwarded or dropped, and where the injected events go) and which items
//! toolpulse adds to the response. One module per presentation. A presentation keeps the
//! Responses dialect; an output protocol that replaces every event (AG-UI) is a translator of
//! its own over the same parser and call tracker (in the core's `ag_ui` folder).
//!
//! - `Plain`: the calls stay the gateway's items; lifecycle events go beside them (profile
//!   `openai-inline`, the payload profiles, or no profile that adds items);
//! - [`companions`]: a companion item beside each call (profile `openai`);
//! - [`hosted`]: calls the gateway runs shown as hosted items in place of its own (profile
//!   `hosted`), with the state of its items in [`hosted_items`].
//!
//! A presentation's state is the current response's: a new response starts a new one.

pub mod companions;
pub mod hosted;
pub mod hosted_items;
pub mod parts;
pub mod shown;

use companions::Companions;
use hosted::Hosted;
use parts::{Parts, Step};

use crate::core::lifecycle::{Tracker, Transition};
use crate::core::profiles::{Context, Profile};
use crate::core::rewrite::decision::{Inject, Verdict};
use crate::core::rewrite::index::OutputIndices;
use crate::core::rewrite::splice::Edit;
use crate::core::rewrite::stream::Stream;
use crate::core::sse::NewEvent;

#[derive(Debug)]
pub enum Presentation {
    Plain,
    Companions(Companions),
    Hosted(Hosted),
}

impl Presentation {
    /// The presentation of `stream`'s profiles (at most one of them adds items), for a new
    /// response.
    pub fn new(stream: &Stream) -> Self {
        if stream.has(Profile::Hosted) {
            Presentation::Hosted(Hosted::default())
        } else if stream.has(Profile::OpenAi) {
            Presentation::Companions(Companions::default())
        } else {
            Presentation::Plain
        }
    }

    pub fn is_hosted(&self) -> bool {
        matches!(self, Presentation::Hosted(_))
    }

    /// Whether every event must be read: any may have to be dropped.
    pub fn must_read(&self) -> bool {
        match self {
            Presentation::Hosted(hosted) => hosted.items.is_active(),
            _ => false,
        }
    }

    /// Whether the events at upstream index `index` are dropped, whatever else they say (the
    /// items `hosted` hides): what [`Presentation::decide`] says of an event without a signal
    /// that names its item by index.
    pub fn hides(&self, index: u64) -> bool {
        match self {
            Presentation::Hosted(hosted) => hosted.items.hides(index),
            _ => false,
        }
    }

    /// What becomes of an upstream event that was read; its calls are tracked.
    pub fn decide(&mut self, step: Step<'_>, parts: &mut Parts<'_>) -> Verdict {
        if let Presentation::Hosted(hosted) = self {
            return hosted.decide(step, parts);
        }
        let Some(signal) = step.signal else {
            return Verdict::Forward(Inject::After);
        };
        let inject = match signal.injects_before() {
            true => Inject::Before,
            false => Inject::After,
        };
        parts.track(signal);
        Verdict::Forward(inject)
    }

    /// Before `transition` is rendered: a call that starts running gets its companion.
    pub fn before_render(
        &mut self,
        transition: &mut Transition,
        indices: &mut OutputIndices,
        tracker: &mut Tracker,
    ) {
        if let Presentation::Companions(companions) = self {
            companions.open(transition, indices, tracker);
        }
    }

    /// Renders `transition` with every profile of `profiles` into `events`; the presentation's
    /// own profile keeps the item's latest state. Returns how many states were left out of
    /// lists (over the budget).
    pub fn render(
        &mut self,
        profiles: &[Profile],
        transition: &Transition,
        context: &Context<'_>,
        events: &mut Vec<NewEvent>,
    ) -> u64 {
        let mut unlisted = 0;
        for &profile in profiles {
            let from = events.len();
            profile.render(transition, context, events);
            unlisted += self.keep(profile, &transition.call.call_id, &events[from..]);
        }
        unlisted
    }

    /// `profile` rendered `events` for call `call_id`: the presentation's profile keeps its
    /// item's latest state. Returns how many states were left out of lists (over the budget).
    fn keep(&mut self, profile: Profile, call_id: &str, events: &[NewEvent]) -> u64 {
        match self {
            Presentation::Companions(c) if profile == Profile::OpenAi => {
                c.shown.keep(call_id, events)
            }
            Presentation::Hosted(h) if profile == Profile::Hosted => h.shown.keep(call_id, events),
            _ => 0,
        }
    }

    /// Call `call_id` finished: what was kept of its items for the store goes (its output came
    /// and took it, or never will).
    pub fn finished(&mut self, call_id: &str) {
        if let Presentation::Hosted(hosted) = self {
            hosted.items.take_call_item(call_id);
        }
    }

    /// The edits of an event's data that lists the response's output: the items toolpulse
    /// shows, in their places.
    pub fn listing(&self, data: &[u8], edits: &mut Vec<Edit>) {
        match self {
            Presentation::Plain => {}
            Presentation::Companions(companions) => companions.listing(data, edits),
            Presentation::Hosted(hosted) => hosted.listing(data, edits),
        }
    }

    /// What the presentation holds for the open calls (the hosted items' shells).
    pub fn held_bytes(&self) -> usize {
        match self {
            Presentation::Hosted(hosted) => hosted.items.shell_bytes(),
            _ => 0,
        }
    }
}
