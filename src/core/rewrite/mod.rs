//! The rewriter: SSE parser + Responses dialect + call tracker + presentation + profiles,
//! sans-IO.
//!
//! `feed(chunk, now)` returns the bytes to send on; `finish(now)` the last ones at upstream EOF.
//! Time only comes in as `now`, so every case is a plain unit test; as quinn-proto's
//! `poll_timeout`/`handle_timeout`/`poll`, [`Rewriter::next_wake`] says when [`Rewriter::on_idle`]
//! has something to send and [`Rewriter::take_observations`] hands over what to report.
//! Invariants: upstream events go out as their own bytes, in order, changed only in their
//! `sequence_number` and `output_index` digits when numbers must shift, and in the
//! items spliced into a `response.output` list; injected events go out the moment their
//! trigger is complete; every injected `in_progress` is closed exactly once; events that cannot
//! be read are forwarded as they are; the output does not depend on how the input was split.
//!
//! Each upstream event is one step: the state machines take in what it means, then one
//! `Decision` says what becomes of it (forwarded, edited, dropped, or forwarded unread with its
//! number held) and whether the events injected for it go before or after it, decided by the
//! stream's presentation (`present::Presentation`) and applied in one place
//! (`Rewriter::apply`).
//!
//! The parts, each in a file of its own: the stream's choices (`stream`), the current
//! response's state (`response`: its output [`index`]es, its presentation), the sequence
//! [`number`]s, the pacing of progress (`pace`), what goes out (`outbound`: the `output`
//! pieces, the `unread` event) and what is reported (`report`); `splice` edits a forwarded
//! event's bytes.

mod decide;
mod decision;
pub mod index;
pub mod number;
mod outbound;
mod output;
mod pace;
mod present;
mod report;
mod response;
mod splice;
mod stream;
mod unread;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;

use crate::core::lifecycle::{Phase, Progress, Tracker, Transition};
use crate::core::profiles::{Context, Profile};
use crate::core::rules::Rule;
use crate::core::settings::Settings;
use crate::core::sse::{self, Event, Item, NewEvent, Parser};
use decision::{Decision, EventNumbers, Fate, Inject};
use number::Numbering;
use outbound::Outbound;
use output::concat;
use pace::Pacer;
use report::Report;
pub use report::{Observation, Stats};
use response::Response;
use splice::Edit;
use stream::Stream;

/// Progress events per call at most this often, unless configured otherwise.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// One stream's rewriter: a handful of parts, each a machine of its own.
pub struct Rewriter {
    settings: Arc<Settings>,
    /// What the glue chose for this stream (profiles, client functions, nonce, clock).
    stream: Stream,
    /// Upstream bytes into events.
    parser: Parser,
    /// The open calls, and the transitions their events cause.
    tracker: Tracker,
    /// `sequence_number`s around injected and dropped events (the stream's, across responses).
    numbering: Numbering,
    /// The current response: its id, output indices, item rules and presentation.
    response: Response,
    /// Out-of-band progress, paced per call.
    pacer: Pacer,
    /// What goes to the client.
    out: Outbound,
    /// Observations and counters.
    report: Report,
    scratch: Scratch,
}

/// Scratch space reused across events.
#[derive(Default)]
struct Scratch {
    transitions: Vec<Transition>,
    events: Vec<NewEvent>,
    /// The edits of one forwarded event.
    edits: Vec<Edit>,
}

impl Rewriter {
    /// A rewriter for one stream, with the settings' profiles (`[events] profiles`).
    pub fn new(settings: Arc<Settings>) -> Self {
        let stream = Stream {
            profiles: settings.profiles.clone(),
            ..Stream::default()
        };
        let limits = settings.limits;
        Rewriter {
            parser: Parser::new(limits.max_event_bytes),
            tracker: Tracker::new(limits.max_open_calls)
                .with_max_held_bytes(limits.max_open_call_bytes)
                .with_deltas(stream.deltas(&settings)),
            response: Response::new(0, &stream),
            stream,
            settings,
            numbering: Numbering::default(),
            pacer: Pacer::new(DEFAULT_PROGRESS_INTERVAL),
            out: Outbound::default(),
            report: Report::default(),
            scratch: Scratch::default(),
        }
    }

    /// Makes `Observation::CallFinished` carry the call's output text.
    pub fn with_output_observations(mut self) -> Self {
        self.report.with_outputs = true;
        self
    }

    /// Renders with these profiles instead of the settings' (a request picked them).
    pub fn with_profiles(mut self, profiles: Vec<Profile>) -> Self {
        self.stream.profiles = profiles;
        let deltas = self.stream.deltas(&self.settings);
        self.tracker = self.tracker.with_deltas(deltas);
        self.response = Response::new(0, &self.stream);
        self
    }

    /// The names of the `function` tools the request declares: under profile `hosted`, their
    /// calls stay `function_call`s for the client to run.
    pub fn with_client_functions(mut self, names: Vec<String>) -> Self {
        self.stream.client_functions = names;
        self
    }

    /// The nonce that makes this stream's hosted item ids differ from other streams' (the glue
    /// gives a random one; the default is 0).
    pub fn with_nonce(mut self, nonce: u64) -> Self {
        self.stream.nonce = nonce;
        self.response = Response::new(0, &self.stream);
        self
    }

    /// Sends progress events per call at most once per `interval`.
    pub fn with_progress_interval(mut self, interval: Duration) -> Self {
        self.pacer = Pacer::new(interval);
        self
    }

    /// Anchors the wall clock: `wall` was the time at `at`; later times follow from `now`.
    pub fn with_wall_clock(mut self, wall: SystemTime, at: Instant) -> Self {
        self.stream.wall_clock = Some((wall, at));
        self
    }

    /// Resumes a stream for a client that has seen every event numbered up to `n` (in the
    /// rewritten numbering): everything before the first event numbered above `n` is dropped.
    pub fn resume_after(mut self, n: u64) -> Self {
        self.out.resume_after(n);
        self
    }

    /// What the stream holds for its open calls: the tracker's calls (names, ids, the one copy
    /// of their arguments) and the hosted items' shells. At most `[limits]
    /// max_open_call_bytes` plus a shell of at most 4 KiB per open hosted call.
    pub fn held_bytes(&self) -> usize {
        self.tracker.held_bytes() + self.response.presentation.held_bytes()
    }

    pub fn stats(&self) -> Stats {
        let mut violations = self.report.stats.violations;
        violations.add(Rule::SequenceRestart, self.numbering.restarts);
        violations.add(Rule::CallDoneNotAdded, self.tracker.done_not_added);
        violations.add(Rule::CallItemIdRepeated, self.tracker.item_id_repeated);
        Stats {
            untracked: self.tracker.untracked(),
            numbers_exhausted: self.numbering.exhausted,
            progress_coalesced: self.pacer.coalesced,
            violations,
            ..self.report.stats
        }
    }

    /// Injected events and finished calls since the last call; `None` when there are none
    /// (most events): a caller that tests for that skips an empty drain's set-up and tear-down.
    pub fn take_observations(&mut self) -> Option<std::vec::Drain<'_, Observation>> {
        self.report.take()
    }

    /// Rewrites the next upstream bytes; returns what to send now (possibly nothing, while an
    /// event is incomplete), in one piece.
    pub fn feed(&mut self, chunk: &[u8], now: Instant) -> Bytes {
        let mut pieces = Vec::new();
        self.feed_into(Bytes::copy_from_slice(chunk), now, &mut pieces);
        concat(pieces)
    }

    /// [`Rewriter::feed`] without copies where nothing changes: upstream events forwarded
    /// unchanged go out as slices of `chunk`; the pieces, in order, are what to send now,
    /// appended to `pieces` (a queue the glue keeps: a chunk's output allocates no list).
    pub fn feed_into(&mut self, chunk: Bytes, now: Instant, pieces: &mut impl Extend<Bytes>) {
        self.out.begin_chunk(chunk.clone());
        self.parser.push_bytes(chunk);
        while let Some(item) = self.parser.next_item() {
            self.on_item(item, now);
        }
        self.send_due_progress(now);
        self.out.end_chunk(now, pieces);
    }

    /// Upstream ended (EOF or disconnect): closes the calls still open and returns the last
    /// bytes. Closing events go before an unterminated tail, which clients discard anyway.
    pub fn finish(&mut self, now: Instant) -> Bytes {
        self.parser.finish();
        while let Some(item) = self.parser.next_item() {
            if let Item::Incomplete(tail) = item {
                self.close_all(now);
                self.out.text().extend_from_slice(&tail);
            } else {
                self.on_item(item, now);
            }
        }
        self.close_all(now);
        concat(self.out.take(now))
    }

    /// When a heartbeat comment is due: only while a call shown by a profile is running, the
    /// interval is not zero, and no half-sent event is open on the client side.
    pub fn next_heartbeat(&self) -> Option<Instant> {
        let interval = self.settings.heartbeat;
        if interval.is_zero() || self.parser.is_mid_event_output() {
            return None;
        }
        let open = self.tracker.open_calls().iter();
        let running = open.filter(|c| c.running_since.is_some() && self.stream.shows(c.kind));
        let earliest = running.filter_map(|c| c.running_since).min()?;
        let quiet_since = self.out.last().map_or(earliest, |t| t.max(earliest));
        Some(quiet_since + interval)
    }

    pub fn heartbeat_due(&self, now: Instant) -> bool {
        self.next_heartbeat().is_some_and(|at| at <= now)
    }

    /// The upstream has been quiet: returns a heartbeat comment if one is due, else nothing.
    pub fn on_idle(&mut self, now: Instant) -> Bytes {
        if self.heartbeat_due(now) {
            self.out.text().extend_from_slice(sse::HEARTBEAT);
            // Profiles that report a running tool at every heartbeat (`stages`): only then are
            // the running calls copied into transitions.
            if self.stream.has(Profile::Stages) {
                self.begin_unnumbered();
                (self.tracker).still_running(now, &mut self.scratch.transitions);
                self.inject(now);
            }
        }
        self.send_due_progress(now);
        concat(self.out.take(now))
    }

    /// Out-of-band progress for the open call `call_id`: rendered by the profiles
    /// as soon as pacing allows (at most one per call per interval, the newest report replacing
    /// an older one, the last one always before the call's end), between upstream events.
    /// Returns what to send now. A report for a call that is not open is dropped.
    pub fn progress(&mut self, call_id: &str, report: Progress, now: Instant) -> Bytes {
        if self.tracker.call(call_id).is_some() {
            let message = report.message.map(|m| self.settings.sanitizer.message(m));
            self.pacer.offer(call_id, Progress { message, ..report });
            self.send_due_progress(now);
        } else {
            self.report.stats.progress_dropped += 1;
        }
        concat(self.out.take(now))
    }

    /// When `on_idle` has something to send: a heartbeat, or a progress report held back by
    /// pacing (never while an event is half forwarded).
    pub fn next_wake(&self) -> Option<Instant> {
        let progress = (!self.parser.is_mid_event_output())
            .then(|| self.pacer.next_due())
            .flatten();
        match (self.next_heartbeat(), progress) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn on_item(&mut self, item: Item, now: Instant) {
        match item {
            Item::Event(event) => {
                self.report.stats.events_in += 1;
                let decision = self.decide(&event, now);
                self.apply(&event, decision, now);
            }
            Item::Oversize(bytes) | Item::Incomplete(bytes) => {
                let continues = self.parser.is_mid_event_output();
                self.report.oversize(bytes.len(), continues);
                self.out.unnumbered(&bytes);
            }
        }
    }

    /// Applies the decision for `event`: the one place where an upstream event goes out (or
    /// not) and its injected events go before or after it.
    fn apply(&mut self, event: &Event, decision: Decision<'_>, now: Instant) {
        if decision.inject == Inject::Before {
            self.inject(now);
        }
        match decision.fate {
            Fate::Unread(data, skip) => self.out.unread(event.raw(), &data, skip),
            Fate::Unnumbered => self.out.unnumbered(event.raw()),
            Fate::Forward(data, numbers) => self.forward(event, &data, numbers),
            Fate::Drop => self.numbering.drop_pending(),
        }
        if decision.inject == Inject::After {
            self.inject(now);
        }
    }

    /// A `response.created`: the response before ended without a terminal event if calls are
    /// still open (they close in it, as at a terminal event), and everything kept of it goes.
    /// Events before the first `response.created` belong to the response it opens.
    fn next_response(&mut self, now: Instant) {
        let ordinal = self.response.ordinal + 1;
        if ordinal == 1 {
            self.response.ordinal = ordinal;
            return;
        }
        if !self.tracker.open_calls().is_empty() {
            self.close_all(now);
        }
        self.response = Response::new(ordinal, &self.stream);
    }

    /// Writes the upstream event, with its numbers rewritten in place where they changed and
    /// the presentation's items spliced into the `response.output` it lists.
    fn forward(&mut self, event: &Event, data: &[u8], numbers: EventNumbers) {
        let renumbered = self.numbering.forward();
        // Mapped even when resumption drops the event: the index is seen all the same.
        let indices = &mut self.response.indices;
        let index = numbers.output_index.as_ref().map(|n| indices.map(n.value));
        if !self.out.passes(renumbered) {
            return;
        }
        if !numbers.lists_output && numbers.changed_id.is_none() {
            // The usual event: its numbers alone may change, edited without a list.
            let edits = [
                splice::number(numbers.sequence_number, renumbered),
                splice::number(numbers.output_index, index),
            ];
            if let [None, None] = edits {
                return self.out.raw(event.raw());
            }
            self.report.stats.renumbered += 1;
            return splice::write_numbers(event, edits, self.out.text());
        }
        let mut edits = std::mem::take(&mut self.scratch.edits);
        (self.response).edits(data, numbers, (renumbered, index), &mut edits);
        if edits.is_empty() {
            self.out.raw(event.raw());
        } else {
            if edits.len() > 1 {
                edits.sort_unstable_by_key(|e| e.0.start);
            }
            self.report.stats.renumbered += 1;
            splice::write(event, &edits, self.out.text());
        }
        edits.clear();
        self.scratch.edits = edits;
    }

    /// Announces that injections follow no upstream number: they take the numbers after the
    /// last one out, so an event forwarded unread since is read now for its number.
    fn begin_unnumbered(&mut self) {
        if let Some(n) = self.out.take_unread_number() {
            self.numbering.begin(Some(n));
            self.numbering.forward();
        }
        self.numbering.begin(None);
    }

    /// Sends the progress reports pacing allows now, unless an event is half forwarded.
    fn send_due_progress(&mut self, now: Instant) {
        if self.parser.is_mid_event_output() || !self.pacer.has_pending() {
            return;
        }
        let due = self.pacer.due(now);
        if due.is_empty() {
            return;
        }
        self.begin_unnumbered();
        for (call_id, report) in due {
            let transition = self.tracker.progress(&call_id, report, now);
            self.scratch.transitions.extend(transition);
        }
        self.inject(now);
    }

    /// Renders, numbers and writes the events for the pending transitions. Most steps have
    /// none: the check is inlined into the loop, the rendering is not.
    #[inline]
    fn inject(&mut self, now: Instant) {
        if !self.scratch.transitions.is_empty() {
            self.inject_transitions(now);
        }
    }

    #[inline(never)]
    fn inject_transitions(&mut self, now: Instant) {
        // Injections are rare (a few per tool call): an Arc clone here is nothing.
        let settings = self.settings.clone();
        let context = Context {
            settings: &settings,
            wall: self.stream.wall(now),
            hosted: self.response.presentation.is_hosted(),
            nonce: self.response.nonce,
        };
        let mut transitions = std::mem::take(&mut self.scratch.transitions);
        for mut transition in transitions.drain(..) {
            let response = &mut self.response;
            (response.presentation).before_render(
                &mut transition,
                &mut response.indices,
                &mut self.tracker,
            );
            if let Some(progress) = self.pacer.last_report(&transition) {
                self.render(&progress, &context);
                self.report.transition(progress, &settings.failure);
            }
            self.render(&transition, &context);
            if let Phase::Finished { .. } = transition.phase {
                self.response
                    .presentation
                    .finished(&transition.call.call_id);
            }
            self.report.transition(transition, &settings.failure);
        }
        self.scratch.transitions = transitions;
        let events = std::mem::take(&mut self.scratch.events);
        for event in &events {
            // No number left under `u64::MAX`: the event stays out (counted in the
            // numbering's `exhausted`, said once in the stream's log line).
            let Ok(seq) = self.numbering.inject() else {
                continue;
            };
            if self.out.passes(seq) {
                sse::encode(self.out.text(), event, seq);
                self.report.stats.injected += 1;
                self.report.observe(Observation::Injected(event.event_type));
            }
        }
        self.scratch.events = events;
        self.scratch.events.clear();
    }

    /// Renders one transition with every profile.
    fn render(&mut self, transition: &Transition, context: &Context<'_>) {
        let (profiles, events) = (&self.stream.profiles, &mut self.scratch.events);
        let presentation = &mut self.response.presentation;
        let unlisted = presentation.render(profiles, transition, context, events);
        self.report.stats.unlisted_companions += unlisted;
    }

    fn close_all(&mut self, now: Instant) {
        if self.parser.is_mid_event_output() {
            self.report.stats.unclosed_at_eof += self.tracker.open_calls().len() as u64;
            return;
        }
        self.begin_unnumbered();
        self.tracker.finish(now, &mut self.scratch.transitions);
        self.inject(now);
    }
}

#[cfg(test)]
mod held_tests;
#[cfg(test)]
mod hosted_tests;
#[cfg(test)]
mod tests;
