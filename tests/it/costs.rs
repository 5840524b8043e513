//! What the core costs per event, as counts that do not move with the machine's load: heap
//! allocations per upstream event, counted for the calling thread only (tests of other modules
//! run on other threads). A budget is a count, so a change that adds an
//! allocation to every forwarded event fails here on any machine; time is for `bench/`.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use toolpulse::core::profiles::Profile;
use toolpulse::{Config, Rewriter};

/// The allocations `f` makes on this thread (the crate `allocation-counter` is this binary's
/// global allocator and counts per thread).
fn allocations(f: impl FnOnce()) -> u64 {
    allocation_counter::measure(f).count_total
}

fn event(seq: usize, kind: &str, rest: &str) -> String {
    format!("event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{seq},{rest}}}\n\n")
}

fn text_delta(seq: usize) -> String {
    let delta = r#""item_id":"msg_1","output_index":0,"content_index":0,"delta":"some words ""#;
    event(seq, "response.output_text.delta", delta)
}

/// A web search the gateway runs: its call added, done, and its output (3 events).
fn web_search(seq: usize, call: usize) -> String {
    let item = format!(
        r#""output_index":1,"item":{{"id":"fc_{call}","type":"function_call","name":"web_search","call_id":"c{call}","arguments":"{{}}"}}"#
    );
    let output = format!(
        r#""output_index":2,"item":{{"id":"o_{call}","type":"function_call_output","call_id":"c{call}","output":"3 results","status":"completed"}}"#
    );
    event(seq, "response.output_item.added", &item)
        + &event(seq + 1, "response.output_item.done", &item)
        + &event(seq + 2, "response.output_item.added", &output)
}

/// Allocations per event while `events` (after `warm_up` of them) go through a rewriter of
/// `profile`, fed `per_chunk` events at a time as the proxy feeds them.
fn per_event(profile: Profile, events: &[String], warm_up: usize, per_chunk: usize) -> f64 {
    let mut config = Config::default();
    config.events.profiles = vec![profile];
    let mut rewriter = Rewriter::new(config.settings());
    let now = Instant::now();
    // As the proxy's reader hands them over: slices split off one read buffer, whose clones
    // cost a count, not an allocation.
    let chunks = |events: &[String]| -> Vec<Bytes> {
        let mut buffer = BytesMut::from(events.concat().as_bytes());
        let sizes = events
            .chunks(per_chunk)
            .map(|c| c.iter().map(String::len).sum());
        sizes.map(|n| buffer.split_to(n).freeze()).collect()
    };
    // The glue's queue of pieces, kept across chunks as the proxy keeps it.
    let mut queued = VecDeque::new();
    for chunk in chunks(&events[..warm_up]) {
        rewriter.feed_into(chunk, now, &mut queued);
        queued.clear();
    }
    let measured = chunks(&events[warm_up..]);
    let n = allocations(|| {
        for chunk in measured {
            rewriter.feed_into(chunk, now, &mut queued);
            queued.clear();
        }
    });
    n as f64 / (events.len() - warm_up) as f64
}

/// An event forwarded untouched costs no allocation: it goes out as a slice of the read it came
/// in, into the glue's queue, whether each read holds one event or a hundred.
#[test]
fn a_forwarded_event_allocates_nothing() {
    let events: Vec<String> = (0..4_000).map(text_delta).collect();
    for profile in [Profile::Hosted, Profile::OpenAi] {
        let paced = per_event(profile, &events, 1_000, 1);
        let flood = per_event(profile, &events, 1_000, 100);
        assert_eq!(paced, 0.0, "{profile:?}, an event per read");
        assert_eq!(flood, 0.0, "{profile:?}, 100 events per read");
    }
}

/// A paced stream's event, copied out of the read as the upstream connection copies it
/// (`http1::buffer::copy_out`) and sent before the next arrives, allocates nothing either: the
/// copy goes into the allocation the event before it used.
#[test]
fn a_paced_event_copied_as_the_read_path_copies_it_allocates_nothing() {
    let events: Vec<String> = (0..2_000).map(text_delta).collect();
    let mut config = Config::default();
    config.events.profiles = vec![Profile::Hosted];
    let mut rewriter = Rewriter::new(config.settings());
    let now = Instant::now();
    let mut copies = BytesMut::new();
    let mut queued = VecDeque::new();
    let mut feed = |event: &String| {
        let chunk = toolpulse::http1::buffer::copy_out(event.as_bytes(), &mut copies);
        rewriter.feed_into(chunk, now, &mut queued);
        // Sent: the pieces, the copy's only other owners, are dropped.
        queued.clear();
    };
    events[..500].iter().for_each(&mut feed);
    let n = allocations(|| events[500..].iter().for_each(&mut feed));
    assert_eq!(n, 0, "{n} allocations for 1,500 paced events");
}

/// While a call runs, every later event is read (its numbers shift); a tool stream's events,
/// calls included, stay within a small budget per event (a count: one more allocation per tool
/// event fails it).
#[test]
fn a_tool_stream_stays_within_its_allocation_budget() {
    let mut events = Vec::new();
    let mut call = 0;
    while events.len() < 5_000 {
        if events.len() % 50 == 47 {
            call += 1;
            events.push(web_search(events.len(), call));
            events.push(String::new());
            events.push(String::new());
        } else {
            events.push(text_delta(events.len()));
        }
    }
    let hosted = per_event(Profile::Hosted, &events, 1_000, 1);
    assert!(
        hosted <= 0.75,
        "{hosted} allocations an event (0.663 since the tool events are read by the scan and \
         written without Value trees; 1.78 before)"
    );
}
