//! The rewriter: SSE parser + Responses dialect + call tracker + profiles, sans-IO.
//!
//! `feed(chunk, now)` returns the bytes to send on; `finish(now)` the last ones at upstream EOF.
//! Time only comes in as `now`, so every case is a plain unit test. Invariants (PRODUCT.md §2):
//! upstream events go out as their own bytes, in order, changed only in their `sequence_number`
//! and `output_index` digits when numbers must shift, and in the companion items spliced into a
//! `response.output` list; injected events go out the moment their trigger is complete; every
//! injected `in_progress` is closed exactly once; events that cannot be read are forwarded as
//! they are; the output does not depend on how the input was split.

mod companions;
mod hosted;
pub mod index;
pub mod number;
mod output;
mod pace;
mod unread;

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use memchr::memmem;

use crate::core::dialect::responses::{self, Number};
use crate::core::lifecycle::Progress;
use crate::core::lifecycle::{
    Deltas, Kind, NativeItem, Outcome, Phase, Signal, Tracker, Transition, Untracked,
};
use crate::core::profiles::{self, Context, Profile, openai};
use crate::core::rules::Rule;
use crate::core::settings::Settings;
use crate::core::sse::{self, Event, Item, NewEvent, Parser};
use companions::Companions;
use hosted::HostedItems;
use index::OutputIndices;
use number::Numbering;
use output::{Output, concat};
use pace::Pacer;
use unread::Unread;

/// Progress events per call at most this often, unless configured otherwise.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Observations kept for the glue between two `take_observations` calls; more are dropped, so a
/// caller that never drains them (the CLI) holds a bounded amount.
const MAX_OBSERVATIONS: usize = 1024;

/// Marks the events [`Unread`] keeps: a cheap scan instead of a parse.
static SEQUENCE_NUMBER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"sequence_number\""));

/// Something worth a metric, a log line or a span, reported by [`Rewriter::take_observations`].
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    Injected(&'static str),
    /// A call's arguments are complete: the gateway runs it now (it may report progress).
    CallRunning {
        call_id: String,
        name: String,
        arguments: String,
    },
    CallFinished {
        call_id: String,
        name: String,
        kind: Kind,
        /// The `[[tools]]` rule that classified the call; `None`: a built-in rule or the fallback.
        rule: Option<usize>,
        /// Whether its output arrived in the stream, i.e. the gateway ran the tool itself.
        had_output: bool,
        outcome: &'static str,
        /// Why it failed, as the profiles' `error.kind` says it (`status_failed`, a
        /// `[failure.kinds]` name, `no_output`, …); `None` when it completed.
        error_kind: Option<String>,
        /// The output text, only when [`Rewriter::with_output_observations`] asked for it.
        output: Option<String>,
        duration: Duration,
    },
    /// A progress report went out for a call (its message already sanitized).
    Progress {
        call_id: String,
        report: Progress,
    },
    /// A call shown as hosted item `id` got its output: the gateway's own pair of items, for
    /// the next turn (profile `hosted`).
    HostedPair {
        id: String,
        /// The `function_call` item as the gateway sent it done.
        call_item: String,
        /// The `function_call_output` item as the gateway sent it.
        output_item: String,
    },
    /// The gateway changed its response's id after `response.created` (LiteLLM does): the
    /// client was shown `shown` throughout, the gateway knows the response as `upstream` (for
    /// the next turn's `previous_response_id`).
    ResponseId {
        shown: String,
        upstream: String,
    },
}

/// Counters for one stream, for logs and metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Complete upstream event blocks seen (comments and oversize events included).
    pub events_in: u64,
    pub injected: u64,
    /// Upstream events whose `sequence_number` was rewritten.
    pub renumbered: u64,
    /// Events forwarded uninterpreted because their data could not be read (fail-open).
    pub unreadable: u64,
    /// Events over `max_event_bytes`, forwarded uninterpreted, and their bytes.
    pub oversize_events: u64,
    pub oversize_bytes: u64,
    /// Calls left without a terminal event because the stream ended inside an oversize event,
    /// where nothing can be injected without corrupting it.
    pub unclosed_at_eof: u64,
    /// Companion items left out of a `response.output` list (over the per-response budget).
    pub unlisted_companions: u64,
    /// Progress reports for calls that were not open (any more).
    pub progress_dropped: u64,
    /// Progress reports replaced by a newer one before they went out.
    pub progress_coalesced: u64,
    /// The stream rules the upstream broke (and what was repaired).
    pub violations: crate::core::rules::Violations,
    /// Calls left as the upstream sent them for a per-stream limit, and calls shown without
    /// their arguments.
    pub untracked: Untracked,
    /// Hosted calls whose pair could not go to the next-turn store: their arguments were not
    /// held (over a limit), so the gateway's call item could not be given back whole.
    pub pairs_unkept: u64,
    /// Injected events left out: the upstream's `sequence_number`s left none free under
    /// `u64::MAX`.
    pub numbers_exhausted: u64,
}

pub struct Rewriter {
    settings: Arc<Settings>,
    profiles: Vec<Profile>,
    parser: Parser,
    tracker: Tracker,
    numbering: Numbering,
    indices: OutputIndices,
    companions: Companions,
    hosted: HostedItems,
    /// The upstream's items of the current response, for the item rules.
    items: crate::core::rules::items::Items,
    /// Tools the request declares as `function` tools: their calls are the client's, never
    /// hidden (profile `hosted`).
    client_functions: Vec<String>,
    /// Makes this stream's hosted item ids its own (given by the glue, random per stream).
    nonce: u64,
    /// Responses started in this stream: a later response's ids get a nonce of their own
    /// ([`response_nonce`]), so a gateway that numbers call ids per response cannot make two
    /// hosted items with one id.
    responses: u64,
    /// The id `response.created` gave the current response: the one every later event of it
    /// must carry (a gateway that changes it breaks [`Rule::ResponseId`]).
    response_id: Option<String>,
    pacer: Pacer,
    output: Output,
    /// Scratch space reused across events.
    transitions: Vec<Transition>,
    new_events: Vec<NewEvent>,
    /// Scratch space for the edits of one forwarded event.
    edits: Vec<(Range<usize>, Splice)>,
    last_output: Option<Instant>,
    /// Stream resumption: drop output until an event numbered above this has gone out.
    resume_after: Option<u64>,
    /// A wall-clock time and the `now` it corresponds to, for profiles that stamp events.
    wall_clock: Option<(SystemTime, Instant)>,
    /// Whether the last item was a piece of an oversize event that has not ended yet.
    in_oversize: bool,
    /// The last numbered event forwarded unread, for the number after it.
    unread: Unread,
    observations: Vec<Observation>,
    /// Whether `CallFinished` carries the output text (tracing with payloads): off, the text
    /// is dropped where it always was, so nothing holds it longer.
    output_observations: bool,
    stats: Stats,
}

impl Rewriter {
    /// A rewriter for one stream, with the settings' profiles (`[events] profiles`).
    pub fn new(settings: Arc<Settings>) -> Self {
        let profiles = settings.profiles.clone();
        Rewriter {
            parser: Parser::new(settings.limits.max_event_bytes),
            tracker: Tracker::new(settings.limits.max_open_calls)
                .with_max_held_bytes(settings.limits.max_open_call_bytes)
                .with_deltas(deltas_for(&profiles, &settings)),
            settings,
            profiles,
            wall_clock: None,
            numbering: Numbering::default(),
            indices: OutputIndices::default(),
            companions: Companions::default(),
            hosted: HostedItems::default(),
            items: Default::default(),
            client_functions: Vec::new(),
            nonce: 0,
            responses: 0,
            response_id: None,
            pacer: Pacer::new(DEFAULT_PROGRESS_INTERVAL),
            output: Output::default(),
            transitions: Vec::new(),
            new_events: Vec::new(),
            edits: Vec::new(),
            last_output: None,
            resume_after: None,
            in_oversize: false,
            unread: Unread::default(),
            observations: Vec::new(),
            output_observations: false,
            stats: Stats::default(),
        }
    }

    /// Makes `Observation::CallFinished` carry the call's output text.
    pub fn with_output_observations(mut self) -> Self {
        self.output_observations = true;
        self
    }

    /// Renders with these profiles instead of the config's (a request picked them).
    pub fn with_profiles(mut self, profiles: Vec<Profile>) -> Self {
        self.tracker = self
            .tracker
            .with_deltas(deltas_for(&profiles, &self.settings));
        self.profiles = profiles;
        self
    }

    /// The names of the `function` tools the request declares: under profile `hosted`, their
    /// calls stay `function_call`s for the client to run.
    pub fn with_client_functions(mut self, names: Vec<String>) -> Self {
        self.client_functions = names;
        self
    }

    /// The nonce that makes this stream's hosted item ids differ from other streams' (the glue
    /// gives a random one; the default is 0).
    pub fn with_nonce(mut self, nonce: u64) -> Self {
        self.nonce = nonce;
        self
    }

    /// Sends progress events per call at most once per `interval`.
    pub fn with_progress_interval(mut self, interval: Duration) -> Self {
        self.pacer = Pacer::new(interval);
        self
    }

    /// Anchors the wall clock: `wall` was the time at `at`; later times follow from `now`.
    pub fn with_wall_clock(mut self, wall: SystemTime, at: Instant) -> Self {
        self.wall_clock = Some((wall, at));
        self
    }

    /// Resumes a stream for a client that has seen every event numbered up to `n` (in the
    /// rewritten numbering): everything before the first event numbered above `n` is dropped.
    pub fn resume_after(mut self, n: u64) -> Self {
        self.resume_after = Some(n);
        self
    }

    /// Whether an event numbered `number` goes out, given stream resumption.
    fn passes(&mut self, number: Option<u64>) -> bool {
        match (self.resume_after, number) {
            (None, _) => true,
            (Some(n), Some(m)) if m > n => {
                self.resume_after = None;
                true
            }
            (Some(_), _) => false,
        }
    }

    /// What the stream holds for its open calls: the tracker's calls (names, ids, the one copy
    /// of their arguments) and the hosted items' shells. At most `[limits]
    /// max_open_call_bytes` plus a shell of at most 4 KiB per open hosted call.
    pub fn held_bytes(&self) -> usize {
        self.tracker.held_bytes() + self.hosted.shell_bytes()
    }

    pub fn stats(&self) -> Stats {
        let mut violations = self.stats.violations;
        violations.add(Rule::SequenceRestart, self.numbering.restarts);
        violations.add(Rule::CallDoneNotAdded, self.tracker.done_not_added);
        violations.add(Rule::CallItemIdRepeated, self.tracker.item_id_repeated);
        Stats {
            untracked: self.tracker.untracked(),
            numbers_exhausted: self.numbering.exhausted,
            unlisted_companions: self.companions.unlisted,
            progress_coalesced: self.pacer.coalesced,
            violations,
            ..self.stats
        }
    }

    /// Whether calls get companion items (profile `openai`).
    fn has_companions(&self) -> bool {
        self.profiles.contains(&Profile::OpenAi)
    }

    /// Whether calls are shown as hosted items (profile `hosted`).
    fn is_hosted(&self) -> bool {
        self.profiles.contains(&Profile::Hosted)
    }

    /// Injected events and finished calls since the last call.
    pub fn take_observations(&mut self) -> std::vec::Drain<'_, Observation> {
        self.observations.drain(..)
    }

    fn observe(&mut self, observation: Observation) {
        if self.observations.len() < MAX_OBSERVATIONS {
            self.observations.push(observation);
        }
    }

    /// Rewrites the next upstream bytes; returns what to send now (possibly nothing, while an
    /// event is incomplete), in one piece.
    pub fn feed(&mut self, chunk: &[u8], now: Instant) -> Bytes {
        let pieces = self.feed_bytes(Bytes::copy_from_slice(chunk), now);
        concat(pieces)
    }

    /// [`Rewriter::feed`] without copies where nothing changes: upstream events forwarded
    /// unchanged go out as slices of `chunk`; the pieces, in order, are what to send now.
    pub fn feed_bytes(&mut self, chunk: Bytes, now: Instant) -> Vec<Bytes> {
        self.output.begin_chunk(chunk.clone());
        self.parser.push_bytes(chunk);
        while let Some(item) = self.parser.next_item() {
            self.on_item(item, now);
        }
        self.send_due_progress(now);
        let pieces = self.take_pieces(now);
        self.unread.keep(self.output.origin());
        self.output.end_chunk();
        pieces
    }

    /// Upstream ended (EOF or disconnect): closes the calls still open and returns the last
    /// bytes. Closing events go before an unterminated tail, which clients discard anyway.
    pub fn finish(&mut self, now: Instant) -> Bytes {
        self.parser.finish();
        while let Some(item) = self.parser.next_item() {
            if let Item::Incomplete(tail) = item {
                self.close_all(now);
                self.output.text().extend_from_slice(&tail);
            } else {
                self.on_item(item, now);
            }
        }
        self.close_all(now);
        self.take_output(now)
    }

    /// When a heartbeat comment is due: only while a call shown by a profile is running, the
    /// interval is not zero, and no half-sent event is open on the client side.
    pub fn next_heartbeat(&self) -> Option<Instant> {
        let interval = self.settings.heartbeat;
        if interval.is_zero() || self.parser.is_mid_event_output() {
            return None;
        }
        let running =
            self.tracker.open_calls().iter().filter(|c| {
                c.running_since.is_some() && self.profiles.iter().any(|p| p.shows(c.kind))
            });
        let earliest = running.filter_map(|c| c.running_since).min()?;
        let quiet_since = self.last_output.map_or(earliest, |t| t.max(earliest));
        Some(quiet_since + interval)
    }

    pub fn heartbeat_due(&self, now: Instant) -> bool {
        self.next_heartbeat().is_some_and(|at| at <= now)
    }

    /// The upstream has been quiet: returns a heartbeat comment if one is due, else nothing.
    pub fn on_idle(&mut self, now: Instant) -> Bytes {
        if self.heartbeat_due(now) {
            self.output.text().extend_from_slice(sse::HEARTBEAT);
            // Profiles that report a running tool at every heartbeat (`stages`): only then are
            // the running calls copied into transitions.
            if self.profiles.contains(&Profile::Stages) {
                self.begin_unnumbered();
                self.tracker.still_running(now, &mut self.transitions);
                self.inject(now);
            }
        }
        self.send_due_progress(now);
        self.take_output(now)
    }

    /// The output so far, in one piece.
    fn take_output(&mut self, now: Instant) -> Bytes {
        let pieces = self.take_pieces(now);
        concat(pieces)
    }

    /// The output so far, in order.
    fn take_pieces(&mut self, now: Instant) -> Vec<Bytes> {
        let pieces = self.output.take();
        if !pieces.is_empty() {
            self.last_output = Some(now);
        }
        pieces
    }

    fn on_item(&mut self, item: Item, now: Instant) {
        match item {
            Item::Event(event) => {
                self.stats.events_in += 1;
                self.on_event(&event, now);
            }
            Item::Oversize(bytes) | Item::Incomplete(bytes) => {
                if !self.in_oversize {
                    self.stats.oversize_events += 1;
                }
                self.in_oversize = self.parser.is_mid_event_output();
                self.stats.oversize_bytes += bytes.len() as u64;
                self.write_unnumbered(&bytes);
            }
        }
    }

    fn on_event(&mut self, event: &Event, now: Instant) {
        let Some(data) = event.data() else {
            // Comments, `id`/`retry`-only blocks, stray blank lines.
            return self.write_unnumbered(event.raw());
        };
        // Numbers are followed while they shift, and while a call is open: its closing events
        // (at a heartbeat, at EOF) take the number after the last one.
        let must_read = self.numbering.is_shifting()
            || self.indices.is_shifting()
            || self.hosted.is_active()
            || !self.tracker.open_calls().is_empty()
            || !event
                .event_type()
                .is_some_and(|line| responses::may_skip(line, &data));
        if !must_read && self.resume_after.is_none() {
            // Not read, so its `output_index` is not seen: every item is introduced by an
            // `output_item.added`/`.done`, which is always read, so the highest index seen is
            // the highest item's (scanning every event for its index cost ~20 % of the
            // text-only throughput).
            self.output.raw(event.raw());
            if SEQUENCE_NUMBER.find(&data).is_none() {
                return;
            }
            self.unread.hold(&data, &self.output);
            return;
        }
        let Ok(reading) = responses::read(&data) else {
            self.stats.unreadable += 1;
            return self.write_unnumbered(event.raw());
        };
        if reading.starts_response {
            self.responses += 1;
            // Events before the first `response.created` belong to the response it opens.
            if self.responses > 1 {
                // The response before ended without a terminal event: its calls close in it,
                // as at a terminal event.
                if !self.tracker.open_calls().is_empty() {
                    self.close_all(now);
                }
                self.indices.reset();
                self.companions.reset();
                self.hosted.reset();
                self.items.reset();
            }
        }
        let changed_id = self.follow_rules(&reading);
        let upstream = Upstream {
            sequence_number: reading.sequence_number,
            output_index: reading.output_index,
            lists_output: reading.lists_output,
            changed_id,
        };
        let index = upstream.output_index.as_ref().map(|n| n.value);
        match &upstream.sequence_number {
            Some(n) => {
                self.unread.forget();
                self.numbering.begin(Some(n.value));
            }
            None => self.begin_unnumbered(),
        }
        // An event naming a hidden item by id alone (no `output_index`: a broken upstream).
        let hidden_by_id = index.is_none()
            && (reading.item_id.as_deref()).is_some_and(|id| self.hosted.hides_item(id));
        let Some(signal) = reading.signal else {
            if hidden_by_id || index.is_some_and(|i| self.hosted.hides(i)) {
                return self.numbering.drop_pending();
            }
            return self.forward(event, &data, upstream);
        };
        let signal = match signal {
            Signal::Native(native) if self.is_hosted() => {
                match self.fold_native(&native, reading.item, index) {
                    Fold::NotOurs => Signal::Native(native),
                    Fold::Folded { output, hidden } => {
                        if let Some(call_id) = output {
                            let call_id = Cow::Owned(call_id);
                            let facts = native.facts;
                            self.track(Signal::Output { call_id, facts }, now);
                        }
                        self.inject(now);
                        if !hidden {
                            self.forward(event, &data, upstream);
                        } else {
                            self.numbering.drop_pending();
                        }
                        return;
                    }
                }
            }
            other => other,
        };
        let before = signal.injects_before();
        let (hidden_item, sighted) = if self.is_hosted() {
            let sighted = match &signal {
                Signal::CallAdded(item) | Signal::CallDone(item) => Some(item.call_id.clone()),
                Signal::Output { call_id, .. } => Some(call_id.clone()),
                _ => None,
            };
            (
                self.before_hosted_signal(&signal, reading.item, index),
                sighted,
            )
        } else {
            (false, None)
        };
        self.track(signal, now);
        self.open_hosted();
        if let Some(call_id) = sighted {
            self.hosted.see(&call_id);
        }
        if hidden_item || hidden_by_id || index.is_some_and(|i| self.hosted.hides(i)) {
            self.inject(now);
            return self.numbering.drop_pending();
        }
        if before {
            self.inject(now);
            self.forward(event, &data, upstream);
        } else {
            self.forward(event, &data, upstream);
            self.inject(now);
        }
    }

    /// Counts the item rules an upstream event breaks and follows the response's id; returns
    /// where the event's `response.id` must be mended ([`Rule::ResponseId`]).
    fn follow_rules(&mut self, reading: &responses::Reading<'_>) -> Option<Range<usize>> {
        let violations = &mut self.stats.violations;
        match (&reading.output_index, reading.item_head) {
            (Some(index), Some(item)) => self.items.item(index.value, item, violations),
            (Some(index), None) => self.items.named(index.value, violations),
            (None, _) => {}
        }
        let id = reading.response_id.as_ref();
        if reading.starts_response {
            self.response_id = id.map(|id| id.value.to_string());
            return None;
        }
        let (id, shown) = (id?, self.response_id.as_ref()?);
        if *shown == id.value {
            return None;
        }
        // The gateway's id is observed, so the next turn's `previous_response_id` can be
        // mapped back to it.
        self.stats.violations.count(Rule::ResponseId);
        let observation = Observation::ResponseId {
            shown: shown.clone(),
            upstream: id.value.to_string(),
        };
        self.observe(observation);
        Some(id.span.clone())
    }

    /// Profile `hosted`, before a signal is tracked. Whether a call id is hosted is decided
    /// once per response, at its first sighting: every later item of a hosted call id (a call
    /// item seen again, its output) is hidden too, and a call id first seen as the client's is
    /// never hosted. The gateway's items of a hosted call are kept for the store, and its output
    /// gives up its index. Returns whether the event is dropped whatever its index says.
    fn before_hosted_signal(
        &mut self,
        signal: &Signal<'_>,
        item_json: Option<&str>,
        index: Option<u64>,
    ) -> bool {
        match signal {
            Signal::CallAdded(item) | Signal::CallDone(item)
                if self.hosted.contains(&item.call_id) =>
            {
                if matches!(signal, Signal::CallDone(_))
                    && let Some(json) = item_json
                {
                    self.hosted.keep_call_item(&item.call_id, json);
                }
                if let Some(i) = index {
                    self.hosted.hide(i);
                }
                true
            }
            Signal::Output { call_id, .. } if self.hosted.contains(call_id) => {
                if let Some(call) = self.tracker.call(call_id)
                    && let (Some(id), Some(output_item)) = (call.hosted_id.clone(), item_json)
                {
                    // The first sight of the output: the pair goes to the store (the call item as
                    // the gateway sent it done, its arguments put back from the call's; as the
                    // call shows it when that was missed). Arguments not held (over a limit)
                    // cannot be given back: no pair, rather than a call with other arguments.
                    let shell = self.hosted.take_call_item(call_id);
                    let call_item = match shell {
                        _ if call.arguments_truncated => None,
                        Some(shell) => Some(shell.with_arguments(&call.arguments)),
                        None => Some(
                            serde_json::json!({
                                "type": "function_call", "call_id": call.call_id,
                                "name": call.name, "arguments": call.arguments,
                                "status": "completed",
                            })
                            .to_string(),
                        ),
                    };
                    match call_item {
                        Some(call_item) => self.observe(Observation::HostedPair {
                            id: id.to_string(),
                            call_item,
                            output_item: output_item.to_string(),
                        }),
                        None => self.stats.pairs_unkept += 1,
                    }
                }
                self.give_up_index(index)
            }
            // A delta without an index names its item only by id.
            Signal::ArgumentsDelta { item_id, .. } if index.is_none() => {
                let call = self
                    .tracker
                    .open_calls()
                    .iter()
                    .find(|c| c.item_id == *item_id);
                call.is_some_and(|c| self.hosted.contains(&c.call_id))
            }
            _ => false,
        }
    }

    /// Profile `hosted`: a hosted item the gateway streams itself for a call already shown as
    /// one (LiteLLM's `mcp_call` after the model's `function_call`: same type, same name, same
    /// arguments once both have them) is folded into toolpulse's: its events are dropped, its
    /// index given up, and its final state is the call's output (the `[failure]` rules apply).
    /// Matched at its first sighting to the oldest such call without one.
    fn fold_native(
        &mut self,
        native: &NativeItem<'_>,
        item_json: Option<&str>,
        index: Option<u64>,
    ) -> Fold {
        let (call_id, hidden) = match self.hosted.native_call(&native.item_id) {
            // Seen before: its index was given up then, or it is shown.
            Some(call_id) => (
                call_id.to_string(),
                index.is_none_or(|i| self.hosted.hides(i)),
            ),
            None => {
                let hosted = &self.hosted;
                // Only into a call shown as a hosted item now (not one the gateway opened
                // again under a call id whose hosted item is done).
                let Some(call) = self.tracker.open_calls().iter().find(|call| {
                    call.hosted_id.is_some()
                        && hosted.contains(&call.call_id)
                        && !hosted.has_native(&call.call_id)
                        && is_native_of(native, call)
                }) else {
                    return Fold::NotOurs;
                };
                let call_id = call.call_id.clone();
                self.hosted.fold_native(&native.item_id, &call_id);
                let hidden = self.give_up_index(index);
                if hidden {
                    self.hosted.hide_item(&native.item_id);
                }
                (call_id, hidden)
            }
        };
        if !native.done {
            return Fold::Folded {
                output: None,
                hidden,
            };
        }
        if let Some(call) = self.tracker.call(&call_id)
            && let (Some(id), Some(item)) = (call.hosted_id.clone(), item_json)
        {
            // The next turn gives the gateway back its own item.
            self.observe(Observation::HostedPair {
                id: id.to_string(),
                call_item: item.to_string(),
                output_item: String::new(),
            });
        }
        Fold::Folded {
            output: Some(call_id),
            hidden,
        }
    }

    /// Profile `hosted`: an upstream item folded into a hosted item (a hosted call's output, the
    /// gateway's own hosted item) gives up its index, so that later items move down; returns
    /// whether its events are dropped. An index a later one was already seen above cannot be
    /// given up without moving indices the client has: the item is then shown as it is.
    fn give_up_index(&mut self, index: Option<u64>) -> bool {
        match index {
            Some(i) if self.hosted.hides(i) => true,
            Some(i) if self.indices.remove(i) => {
                self.hosted.hide(i);
                true
            }
            Some(_) => {
                self.stats.violations.count(Rule::HostedOutputIndex);
                false
            }
            None => true,
        }
    }

    /// Profile `hosted`: every call that just started and is the gateway's to run is shown as a
    /// hosted item at its `function_call`'s index, whose events are dropped from now on.
    fn open_hosted(&mut self) {
        if !self.is_hosted() {
            return;
        }
        for i in 0..self.transitions.len() {
            let transition = &self.transitions[i];
            let call = &transition.call;
            let eligible = transition.phase == Phase::Started
                && call.companion.is_none()
                && profiles::hosted::hosts(call.kind)
                && call.call_id.len() <= crate::core::lifecycle::track::MAX_ID_BYTES
                && !self.client_functions.contains(&call.name)
                && !self.hosted.was_seen(&call.call_id)
                && !self.hosted.is_full();
            let Some(upstream) = call.output_index.filter(|_| eligible) else {
                continue;
            };
            let index = self.indices.map(upstream);
            let call_id = call.call_id.clone();
            let nonce = response_nonce(self.nonce, self.responses);
            let id: Arc<str> = self.settings.key.id_for(&call_id, nonce).into();
            self.hosted.open(&call_id, &call.item_id, upstream);
            self.tracker.set_hosted(&call_id, index, &id);
            // The call's later transitions (already queued with it) show the item too.
            for later in &mut self.transitions[i..] {
                if later.call.call_id == call_id {
                    later.call.companion = Some(index);
                    later.call.hosted_id = Some(id.clone());
                }
            }
        }
    }

    /// Announces that injections follow no upstream number: they take the numbers after the
    /// last one out, so an event forwarded unread since is read now for its number.
    fn begin_unnumbered(&mut self) {
        if let Some(n) = self.unread.take_number(self.output.origin()) {
            self.numbering.begin(Some(n));
            self.numbering.forward();
        }
        self.numbering.begin(None);
    }

    fn track(&mut self, signal: Signal<'_>, now: Instant) {
        let settings = &self.settings;
        self.tracker.on_signal(
            signal,
            now,
            &settings.classifier,
            &settings.failure,
            &mut self.transitions,
        );
    }

    /// Writes the upstream event, with its numbers rewritten in place where they changed and
    /// the companions spliced into the `response.output` it lists.
    fn forward(&mut self, event: &Event, data: &[u8], upstream: Upstream) {
        let raw = event.raw();
        let renumbered = self.numbering.forward();
        // Mapped even when resumption drops the event: the index is seen all the same.
        let index = upstream
            .output_index
            .as_ref()
            .map(|n| self.indices.map(n.value));
        if !self.passes(renumbered) {
            return;
        }
        let mut edits = std::mem::take(&mut self.edits);
        if upstream.lists_output && self.is_hosted() && self.hosted.is_active() {
            edits.extend(self.hosted.listing(data, &self.companions));
        } else if upstream.lists_output && !self.companions.is_empty() {
            self.companions.insertions(data, &mut edits);
        }
        let mut digits = |number: Option<Number>, new: Option<u64>| {
            if let (Some(old), Some(new)) = (number, new)
                && new != old.value
            {
                edits.push((old.span, Splice::Number(new)));
            }
        };
        digits(upstream.sequence_number, renumbered);
        digits(upstream.output_index, index);
        if let (Some(span), Some(id)) = (upstream.changed_id, &self.response_id) {
            let id = serde_json::Value::from(id.as_str()).to_string();
            edits.push((span, Splice::Text(id)));
        }
        if edits.is_empty() {
            self.output.raw(raw);
        } else {
            if edits.len() > 1 {
                edits.sort_unstable_by_key(|e| e.0.start);
            }
            self.stats.renumbered += 1;
            splice(event, &edits, self.output.text());
        }
        edits.clear();
        self.edits = edits;
    }

    /// Gives a call that starts running its companion's index (profile `openai`), unless its
    /// call id already had one in this response or the limits are reached.
    fn open_companion(&mut self, transition: &mut Transition) {
        let call = &mut transition.call;
        if transition.phase != Phase::Running
            || call.companion.is_some()
            || !openai::shows(call.kind)
            || !self.has_companions()
            || self.companions.contains(&call.call_id)
        {
            return;
        }
        if let Some(index) = self.indices.open_companion() {
            call.companion = Some(index);
            self.tracker.set_companion(&call.call_id, index);
        }
    }

    /// Keeps the companion's state from the `item` of the events just rendered for it.
    fn keep_companion(&mut self, transition: &Transition, from: usize) {
        for event in &self.new_events[from..] {
            if let Some((_, item)) = event.fields.iter().find(|f| f.0 == "item") {
                self.companions
                    .set(&transition.call.call_id, item.to_string());
            }
        }
    }

    /// Renders one transition with every profile.
    fn render(&mut self, transition: &Transition, context: &Context<'_>) {
        for i in 0..self.profiles.len() {
            let (profile, from) = (self.profiles[i], self.new_events.len());
            profile.render(transition, context, &mut self.new_events);
            if matches!(profile, Profile::OpenAi | Profile::Hosted) {
                self.keep_companion(transition, from);
            }
        }
    }

    /// Out-of-band progress for the open call `call_id` (seed 002): rendered by the profiles
    /// as soon as pacing allows (at most one per call per interval, the newest report replacing
    /// an older one, the last one always before the call's end), between upstream events.
    /// Returns what to send now. A report for a call that is not open is dropped.
    pub fn progress(&mut self, call_id: &str, report: Progress, now: Instant) -> Bytes {
        if self.tracker.call(call_id).is_some() {
            let message = report.message.map(|m| {
                match self.settings.sanitizer.value(serde_json::Value::String(m)) {
                    serde_json::Value::String(m) => m,
                    other => other.to_string(),
                }
            });
            self.pacer.offer(call_id, Progress { message, ..report });
            self.send_due_progress(now);
        } else {
            self.stats.progress_dropped += 1;
        }
        self.take_output(now)
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

    /// Sends the progress reports pacing allows now, unless an event is half forwarded.
    fn send_due_progress(&mut self, now: Instant) {
        if self.parser.is_mid_event_output() {
            return;
        }
        let due = self.pacer.due(now);
        if due.is_empty() {
            return;
        }
        self.begin_unnumbered();
        for (call_id, report) in due {
            if let Some(call) = self.tracker.call(&call_id) {
                let since = call.running_since.unwrap_or(call.added_at);
                let elapsed = now.saturating_duration_since(since);
                let phase = Phase::Progress { elapsed, report };
                let call = call.clone();
                self.transitions.push(Transition { call, phase });
            }
        }
        self.inject(now);
    }

    /// Renders, numbers and writes the events for the pending transitions.
    fn inject(&mut self, now: Instant) {
        let wall = self
            .wall_clock
            .map(|(wall, at)| wall + now.saturating_duration_since(at));
        // Injections are rare (a few per tool call): an Arc clone here is nothing.
        let settings = self.settings.clone();
        let context = Context {
            settings: &settings,
            wall,
            hosted: self.is_hosted(),
            nonce: response_nonce(self.nonce, self.responses),
        };
        let mut transitions = std::mem::take(&mut self.transitions);
        for mut transition in transitions.drain(..) {
            self.open_companion(&mut transition);
            if let Phase::Finished { duration, .. } = &transition.phase
                && let Some(report) = self.pacer.finish(&transition.call.call_id)
            {
                // The last report before the call's end always goes out.
                let phase = Phase::Progress {
                    elapsed: *duration,
                    report,
                };
                let call = transition.call.clone();
                let progress = Transition { call, phase };
                self.render(&progress, &context);
                self.observe_progress(&progress);
            }
            self.render(&transition, &context);
            self.observe_progress(&transition);
            if transition.phase == Phase::Running {
                self.observe(Observation::CallRunning {
                    call_id: transition.call.call_id.clone(),
                    name: transition.call.name.clone(),
                    arguments: transition.call.arguments.clone(),
                });
            }
            if let Phase::Finished {
                outcome,
                duration,
                output,
            } = transition.phase
            {
                // Its output came (and took the shell) or never will.
                self.hosted.take_call_item(&transition.call.call_id);
                let error_kind = match &outcome {
                    Outcome::Completed => None,
                    Outcome::Failed(failure) => Some(self.settings.failure.kind_of(failure)),
                };
                self.observe(Observation::CallFinished {
                    call_id: transition.call.call_id,
                    name: transition.call.name,
                    kind: transition.call.kind,
                    rule: transition.call.rule,
                    had_output: output.is_some(),
                    outcome: outcome.as_str(),
                    error_kind,
                    output: output.filter(|_| self.output_observations).map(|o| o.text),
                    duration,
                });
            }
        }
        self.transitions = transitions;
        let events = std::mem::take(&mut self.new_events);
        for event in &events {
            // No number left under `u64::MAX`: the event stays out (counted in the
            // numbering's `exhausted`, said once in the stream's log line).
            let Ok(seq) = self.numbering.inject() else {
                continue;
            };
            if self.passes(seq) {
                sse::encode(self.output.text(), event, seq);
                self.stats.injected += 1;
                self.observe(Observation::Injected(event.event_type));
            }
        }
        self.new_events = events;
        self.new_events.clear();
    }

    /// Reports a progress transition that was rendered (for spans' events).
    fn observe_progress(&mut self, transition: &Transition) {
        if let Phase::Progress { report, .. } = &transition.phase {
            self.observe(Observation::Progress {
                call_id: transition.call.call_id.clone(),
                report: report.clone(),
            });
        }
    }

    fn write_unnumbered(&mut self, bytes: &Bytes) {
        if self.passes(None) {
            self.output.raw(bytes);
        }
    }

    fn close_all(&mut self, now: Instant) {
        if self.parser.is_mid_event_output() {
            self.stats.unclosed_at_eof += self.tracker.open_calls().len() as u64;
            return;
        }
        self.begin_unnumbered();
        self.tracker.finish(now, &mut self.transitions);
        self.inject(now);
    }
}

/// What an upstream event's numbers are, and whether it lists the response's output.
struct Upstream {
    sequence_number: Option<Number>,
    output_index: Option<Number>,
    lists_output: bool,
    /// Where the event's `response.id` differs from the created one ([`Rule::ResponseId`]).
    changed_id: Option<Range<usize>>,
}

/// What replaces a range of an upstream event's data.
#[derive(Debug)]
pub(crate) enum Splice {
    /// A number's new digits (written straight into the output, no allocation).
    Number(u64),
    /// Text spliced in (a companion listed in `response.output`).
    Text(String),
}

/// Writes `event`'s raw bytes with `edits` applied: each `(range of the data, splice)` replaces
/// that range (an empty range inserts), in order. If an edited range does not lie contiguous
/// in the raw event (a number split across `data:` lines), the event goes out as it is.
/// What became of a hosted item of the gateway's own.
enum Fold {
    /// No call shown as a hosted item is its: it passes as it is.
    NotOurs,
    /// Folded into a call's item; `output`: it is done, its state the output of that call;
    /// `hidden`: its events are dropped (else it keeps an index it could not give up).
    Folded {
        output: Option<String>,
        hidden: bool,
    },
}

/// Whether the gateway's hosted item `native` is the one of `call`: the same kind, the same
/// name (when it has one), the same arguments (when both have them; as JSON values).
/// What argument deltas must carry for `profiles` to render them: `stages` shows the arguments
/// so far (up to `max_payload_bytes`), `hosted` the chunk (of MCP calls), the others nothing.
fn deltas_for(profiles: &[Profile], settings: &Settings) -> Deltas {
    if profiles.contains(&Profile::Stages) {
        let max_bytes = settings.sanitizer.max_payload_bytes();
        Deltas::WithArguments { max_bytes }
    } else if profiles.contains(&Profile::Hosted) {
        Deltas::Chunks
    } else {
        Deltas::Off
    }
}

fn is_native_of(native: &NativeItem<'_>, call: &crate::core::lifecycle::Call) -> bool {
    let same_arguments = match native.arguments.as_deref() {
        None | Some("") => true,
        Some(args) if call.arguments.is_empty() || args == call.arguments => true,
        Some(args) => {
            let value = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
            value(args).is_some_and(|a| Some(a) == value(&call.arguments))
        }
    };
    native.kind == call.kind
        && native.name.as_deref().is_none_or(|name| name == call.name)
        && same_arguments
}

fn splice(event: &Event, edits: &[(Range<usize>, Splice)], out: &mut BytesMut) {
    let raw = event.raw();
    let mut from = 0;
    let start_len = out.len();
    for (range, text) in edits {
        let start = event.raw_offset_of_data(range.start);
        let end = match range.end.checked_sub(1).filter(|_| !range.is_empty()) {
            Some(last) => event.raw_offset_of_data(last).map(|l| l + 1),
            None => start,
        };
        match (start, end) {
            (Some(start), Some(end)) if end - start == range.len() && start >= from => {
                out.extend_from_slice(&raw[from..start]);
                match text {
                    Splice::Number(n) => {
                        out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes())
                    }
                    Splice::Text(text) => out.extend_from_slice(text.as_bytes()),
                }
                from = end;
            }
            // A range across two `data` lines: the event is written again, its data edited
            // whole (the client reads the same data, but for the edits).
            _ => {
                out.truncate(start_len);
                return splice_joined(event, edits, out);
            }
        }
    }
    out.extend_from_slice(&raw[from..]);
}

/// [`splice`] on the event's joined data, written back as `data` lines; the event as it is
/// when an edit does not fit the data.
fn splice_joined(event: &Event, edits: &[(Range<usize>, Splice)], out: &mut BytesMut) {
    let Some(data) = event.data() else {
        return out.extend_from_slice(event.raw());
    };
    let mut edited = Vec::with_capacity(data.len() + 64);
    let mut from = 0;
    for (range, text) in edits {
        if range.start < from || range.end > data.len() {
            return out.extend_from_slice(event.raw());
        }
        edited.extend_from_slice(&data[from..range.start]);
        match text {
            Splice::Number(n) => {
                edited.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes())
            }
            Splice::Text(text) => edited.extend_from_slice(text.as_bytes()),
        }
        from = range.end;
    }
    edited.extend_from_slice(&data[from..]);
    event.write_with_data(&edited, out);
}

/// The nonce of the stream's `ordinal`th response: the stream's own for the first, then a
/// mix of both (splitmix64's finalizer), as unlikely to meet another stream's as two random
/// nonces are.
fn response_nonce(nonce: u64, ordinal: u64) -> u64 {
    if ordinal <= 1 {
        return nonce;
    }
    let mut z = nonce ^ ordinal.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod held_tests;
#[cfg(test)]
mod tests;
