//! Unit tests of the rewriter with an explicit clock: durations, heartbeats, the end of the
//! stream, resumption, numbers, progress, zero-copy pieces, observations. Whole-stream
//! behaviour is covered by the golden fixtures in `tests/`. The helpers here are shared with
//! tests of presentation `hosted` (`hosted_tests`).

use std::time::Duration;

use super::unread::MAX_UNREAD_COPY;
use super::*;
use crate::config::Config;
use crate::core::lifecycle::Progress;

pub(super) const ADDED: &str = r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","name":"web_search","call_id":"c1","arguments":""}}"#;
pub(super) const DONE: &str = r#"{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","name":"web_search","call_id":"c1","arguments":"{}"}}"#;
pub(super) const OUTPUT: &str = r#"{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"id":"o_1","type":"function_call_output","call_id":"c1","output":"8 results","status":"completed"}}"#;

pub(super) fn ev(json: &str) -> Vec<u8> {
    let kind = json.split('"').nth(3).expect("type first");
    format!("event: {kind}\ndata: {json}\n\n").into_bytes()
}

/// A rewriter with the companion shape (`openai`), which these tests are written against;
/// `hosted` has its own tests (`hosted_tests`, and in `profiles::hosted`).
pub(super) fn rewriter(heartbeat_ms: u64) -> Rewriter {
    Rewriter::new(
        Config {
            heartbeat: Duration::from_millis(heartbeat_ms),
            ..Config::default()
        }
        .settings(),
    )
    .with_profiles(vec![Profile::OpenAi])
}

pub(super) fn text(b: &Bytes) -> &str {
    std::str::from_utf8(b).expect("utf-8")
}

/// Feeds `input` in one chunk and finishes; the output must keep the invariants.
pub(super) fn whole_stream(r: &mut Rewriter, input: &[u8], now: Instant) -> String {
    let mut out = r.feed(input, now).to_vec();
    out.extend_from_slice(&r.finish(now));
    // The oracle (a dev-dependency that depends on this crate) links a second copy of the crate
    // into these tests; only bytes pass between them, so no type of one meets the other's.
    invariants::check(input, &out, usize::MAX).expect("invariants");
    String::from_utf8(out).expect("utf-8")
}

/// The first event of `text` that mentions `kind`.
pub(super) fn event_of<'a>(text: &'a str, kind: &str) -> Option<&'a str> {
    text.split("\n\n").find(|e| e.contains(kind))
}

#[test]
fn duration_is_measured_from_running_to_output() {
    let t0 = Instant::now();
    let mut r = rewriter(0);
    r.feed(&ev(ADDED), t0);
    let running = r.feed(&ev(DONE), t0 + Duration::from_millis(5));
    assert!(text(&running).contains("web_search_call.searching"));
    let out = r.feed(&ev(OUTPUT), t0 + Duration::from_millis(1255));
    let out = text(&out);
    assert!(
        out.starts_with("event: response.web_search_call.completed\n"),
        "{out}"
    );
    assert!(out.contains(r#""sequence_number":6,"#), "{out}");
    assert!(
        out.contains(r#""outcome":"completed","duration_ms":1250}"#),
        "{out}"
    );
    let done = event_of(out, "response.output_item.done").expect("companion done");
    assert!(
        done.contains(r#""sequence_number":7,"output_index":1,"#),
        "{done}"
    );
    assert!(
        out.contains(r#""sequence_number":8,"output_index":2"#),
        "renumbered and shifted past the companion: {out}"
    );
    assert_eq!(r.stats().injected, 5);
    assert_eq!(r.stats().renumbered, 1);
}

#[test]
fn injected_events_leave_with_their_trigger() {
    let t0 = Instant::now();
    let mut r = rewriter(0);
    r.feed(&ev(ADDED), t0);
    let done = ev(DONE);
    let (head, last) = done.split_at(done.len() - 1);
    assert!(r.feed(head, t0).is_empty(), "the event is not complete yet");
    let out = r.feed(last, t0);
    assert!(text(&out).contains("web_search_call.in_progress"));
}

#[test]
fn heartbeats_only_while_a_shown_tool_runs_and_upstream_is_quiet() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut r = rewriter(1000);
    r.feed(&ev(ADDED), t0);
    assert_eq!(r.next_heartbeat(), None, "not running yet");
    r.feed(&ev(DONE), ms(100));
    assert_eq!(r.next_heartbeat(), Some(ms(1100)));
    assert!(r.on_idle(ms(1099)).is_empty());
    assert_eq!(&r.on_idle(ms(1100))[..], sse::HEARTBEAT);
    assert_eq!(
        r.next_heartbeat(),
        Some(ms(2100)),
        "counted from the last bytes sent"
    );
    r.feed(b"event: response.in_progress\ndata: {}\n\n", ms(1500));
    assert_eq!(r.next_heartbeat(), Some(ms(2500)));
    r.feed(&ev(OUTPUT), ms(1600));
    assert_eq!(r.next_heartbeat(), None, "no tool runs any more");
    assert!(r.on_idle(ms(9000)).is_empty());
}

#[test]
fn heartbeats_off_and_not_for_unshown_kinds() {
    let t0 = Instant::now();
    let mut r = rewriter(0);
    r.feed(&ev(ADDED), t0);
    r.feed(&ev(DONE), t0);
    assert_eq!(r.next_heartbeat(), None);
    let mut r = rewriter(1000);
    let plain = |s: &str| s.replace("web_search", "get_weather");
    r.feed(&ev(&plain(ADDED)), t0);
    r.feed(&ev(&plain(DONE)), t0);
    assert_eq!(
        r.next_heartbeat(),
        None,
        "generic functions show nothing in `openai`"
    );
}

#[test]
fn eof_inside_an_oversize_event_injects_nothing_into_it() {
    let t0 = Instant::now();
    let mut config = Config::default();
    config.limits.max_event_bytes = 1024;
    let mut r = Rewriter::new(config.settings());
    r.feed(&ev(ADDED), t0);
    r.feed(&ev(DONE), t0);
    let big = format!("data: {}", "x".repeat(2000));
    let out = r.feed(big.as_bytes(), t0);
    assert_eq!(&out[..], big.as_bytes(), "oversize bytes stream through");
    assert_eq!(
        r.next_heartbeat(),
        None,
        "a heartbeat would land inside the event"
    );
    assert!(r.finish(t0).is_empty());
    assert_eq!(r.stats().unclosed_at_eof, 1);
}

#[test]
fn unterminated_tail_comes_after_the_closing_events() {
    let t0 = Instant::now();
    let mut r = rewriter(0);
    r.feed(&ev(ADDED), t0);
    r.feed(&ev(DONE), t0);
    r.feed(b"data: {\"type\":\"resp", t0);
    let out = r.finish(t0);
    let out = text(&out);
    assert!(
        out.starts_with("event: response.web_search_call.completed\n"),
        "{out}"
    );
    assert!(out.contains(r#""outcome":"failed""#));
    assert!(out.ends_with("\n\ndata: {\"type\":\"resp"), "{out}");
}

#[test]
fn resumption_sends_exactly_what_the_client_missed() {
    let t0 = Instant::now();
    let created = r#"{"type":"response.created","sequence_number":0}"#;
    let input = [ev(created), ev(ADDED), ev(DONE), ev(OUTPUT)].concat();
    let full = rewriter(0).feed(&input, t0);
    let full = text(&full);
    let blocks: Vec<&str> = full.split_inclusive("\n\n").collect();
    assert_eq!(blocks.len(), 9, "4 upstream + 5 injected");
    for n in 0..9u64 {
        let resumed = rewriter(0).resume_after(n).feed(&input, t0);
        let expected: String = blocks[n as usize + 1..].concat();
        assert_eq!(text(&resumed), expected, "starting_after={n}");
    }
}

#[test]
fn events_after_a_new_run_are_counted_while_a_call_is_open() {
    // Another response starts on the same connection (numbers from 0 again, so no shift) while
    // a call of the first is still open: the events after it pass unshifted, but the call's
    // closing events must still take the next number, not repeat one (the rewriter fuzzer's
    // find).
    let t0 = Instant::now();
    let mut r = rewriter(0);
    let created = r#"{"type":"response.created","sequence_number":0}"#;
    let delta = r#"{"type":"response.output_text.delta","sequence_number":1,"delta":"hi"}"#;
    let input = [ev(ADDED), ev(DONE), ev(created), ev(delta)].concat();
    let text = whole_stream(&mut r, &input, t0);
    assert!(
        event_of(&text, "web_search_call.completed")
            .is_some_and(|e| e.contains(r#""sequence_number":2,"#)),
        "{text}"
    );
}

#[test]
fn an_unnumbered_call_after_unread_events_takes_the_next_number() {
    // A numbered stream whose function_call item arrives without a number: its injected events
    // take the numbers after the last numbered event forwarded unread, whether that event was
    // small (copied, read only now) or too large to copy (read at once), and whatever unnumbered
    // events followed it (the rewriter fuzzer's find).
    let unnumbered = r#"{"type":"response.output_text.delta","delta":"hi"}"#;
    for (text_len, tail) in [
        (10, 0),
        (MAX_UNREAD_COPY * 2, 0),
        (10, 3),
        (MAX_UNREAD_COPY * 2, 3),
    ] {
        let t0 = Instant::now();
        let mut r = rewriter(0);
        let created = r#"{"type":"response.created","sequence_number":0}"#;
        let done = format!(
            r#"{{"type":"response.output_text.done","text":"{}","sequence_number":1}}"#,
            "x".repeat(text_len)
        );
        let added = ADDED.replace(r#""sequence_number":1,"#, "");
        let args_done = DONE.replace(r#""sequence_number":2,"#, "");
        let tail = ev(unnumbered).repeat(tail);
        let input = [ev(created), ev(&done), tail, ev(&added), ev(&args_done)].concat();
        let text = whole_stream(&mut r, &input, t0);
        assert!(
            event_of(&text, r#""id":"tp_c1""#)
                .is_some_and(|e| e.contains(r#""sequence_number":2,"#)),
            "text of {text_len}: {text}"
        );
    }
}

fn report(n: f64, message: &str) -> Progress {
    Progress {
        progress: n,
        total: Some(4.0),
        message: Some(message.into()),
    }
}

#[test]
fn progress_is_paced_numbered_and_its_last_report_precedes_the_end() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut r = rewriter(0)
        .with_profiles(vec![Profile::OpenAi, Profile::Progress, Profile::Tool])
        .with_progress_interval(Duration::from_millis(100));
    let mut out = Vec::new();
    let mut input = Vec::new();
    for (event, at) in [(ev(ADDED), 0), (ev(DONE), 1)] {
        input.extend_from_slice(&event);
        out.extend_from_slice(&r.feed(&event, ms(at)));
    }
    let first = r.progress("c1", report(1.0, "step 1/4\r\ndata: x"), ms(10));
    let first = text(&first);
    assert!(
        first.contains(r#""type":"response.web_search_call.progress""#),
        "{first}"
    );
    assert!(first.contains(r#""type":"tool_progress""#), "{first}");
    assert!(
        first.contains(r#""message":"step 1/4\r\ndata: x""#),
        "escaped: {first}"
    );
    out.extend_from_slice(first.as_bytes());
    assert!(
        r.progress("c1", report(2.0, "step 2/4"), ms(20)).is_empty(),
        "paced"
    );
    assert!(r.progress("c1", report(3.0, "step 3/4"), ms(30)).is_empty());
    assert_eq!(r.next_wake(), Some(ms(110)));
    let held = r.on_idle(ms(110));
    assert!(text(&held).contains("step 3/4") && !text(&held).contains("step 2/4"));
    out.extend_from_slice(&held);
    assert!(
        r.progress("c1", report(4.0, "step 4/4"), ms(150))
            .is_empty()
    );
    assert!(r.progress("nobody", report(1.0, "x"), ms(150)).is_empty());
    assert_eq!(r.stats().progress_dropped, 1);
    let end = r.feed(&ev(OUTPUT), ms(160));
    let end = text(&end);
    let (last, terminal) = (end.find("step 4/4"), end.find("web_search_call.completed"));
    assert!(
        last.is_some() && last < terminal,
        "the last report before the end: {end}"
    );
    input.extend_from_slice(&ev(OUTPUT));
    out.extend_from_slice(end.as_bytes());
    out.extend_from_slice(&r.finish(ms(170)));
    invariants::check(&input, &out, usize::MAX).expect("invariants");
}

#[test]
fn progress_waits_for_a_half_forwarded_event() {
    let t0 = Instant::now();
    let mut r = Rewriter::new(
        Config {
            heartbeat: Duration::ZERO,
            limits: crate::config::Limits {
                max_event_bytes: 512,
                ..Config::default().limits
            },
            ..Config::default()
        }
        .settings(),
    )
    .with_profiles(vec![Profile::Stages]);
    r.feed(&ev(ADDED), t0);
    r.feed(&ev(DONE), t0);
    // An oversize event is on its way out: nothing may go inside it.
    let half = r.feed(
        format!("data: {{\"x\":\"{}", "y".repeat(1000)).as_bytes(),
        t0,
    );
    assert!(!half.is_empty());
    assert!(r.progress("c1", report(1.0, "m"), t0).is_empty());
    assert_eq!(r.next_wake(), None);
    let rest = r.feed(b"\"}\n\n", t0);
    let rest = text(&rest);
    assert!(
        rest.starts_with("\"}\n\n") && rest.contains(r#""progress":1,"#),
        "{rest}"
    );
}

/// The pieces `feed_into` gives for a stream fed in `chunk`-byte pieces, each with whether
/// it is a slice of the chunk it came from (not copied).
fn pieces_of(input: &[u8], chunk: usize) -> (Vec<u8>, usize) {
    let now = Instant::now();
    let mut r = rewriter(0);
    let (mut out, mut copied) = (Vec::new(), 0);
    for part in input.chunks(chunk) {
        let part = Bytes::copy_from_slice(part);
        let range = part.as_ptr_range();
        let mut pieces = Vec::new();
        r.feed_into(part.clone(), now, &mut pieces);
        for piece in pieces {
            let at = piece.as_ptr_range();
            if !(range.start <= at.start && at.end <= range.end) {
                copied += piece.len();
            }
            out.extend_from_slice(&piece);
        }
    }
    out.extend_from_slice(&r.finish(now));
    (out, copied)
}

#[test]
fn unchanged_events_go_out_as_slices_of_their_chunk() {
    let mut input = Vec::new();
    for n in 0..400 {
        let delta = format!(
            r#"{{"type":"response.output_text.delta","sequence_number":{n},"item_id":"m","output_index":0,"content_index":0,"delta":"word {n} "}}"#
        );
        input.extend(ev(&delta));
    }
    let event_len = input.len() / 400 + 2;
    for chunk in [16 * 1024, 1000, 333] {
        let (out, copied) = pieces_of(&input, chunk);
        assert_eq!(out, input, "unchanged, chunk {chunk}");
        // Only the events cut by a chunk's end are copied.
        let chunks = input.len().div_ceil(chunk);
        assert!(
            copied <= chunks * event_len,
            "chunk {chunk}: {copied} bytes copied"
        );
    }
}

#[test]
fn pieces_make_the_same_output_as_one_piece() {
    let mut input = Vec::new();
    for json in [ADDED, DONE, OUTPUT] {
        input.extend(ev(json));
    }
    input.extend(ev(
        r#"{"type":"response.output_text.delta","sequence_number":4,"output_index":2,"delta":"x"}"#,
    ));
    let now = Instant::now();
    let mut whole = rewriter(0);
    let expected = whole_stream(&mut whole, &input, now);
    for chunk in 1..input.len() {
        let (out, _) = pieces_of(&input, chunk);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            expected,
            "chunk {chunk}"
        );
    }
}

/// The observations a span is built from: progress that went out (not what pacing replaced),
/// the failure kind, and the output only when asked for.
#[test]
fn observations_carry_progress_failure_kind_and_output_on_request() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let progress_of = |r: &mut Rewriter| -> Vec<String> {
        r.take_observations()
            .into_iter()
            .flatten()
            .filter_map(|o| match o {
                Observation::Progress { report, .. } => report.message,
                _ => None,
            })
            .collect()
    };
    let mut r = rewriter(0)
        .with_progress_interval(Duration::from_millis(100))
        .with_output_observations();
    r.feed(&ev(ADDED), ms(0));
    r.feed(&ev(DONE), ms(1));
    let running = r
        .take_observations()
        .into_iter()
        .flatten()
        .any(|o| matches!(o, Observation::CallRunning { ref call_id, .. } if call_id == "c1"));
    assert!(running);
    r.progress("c1", report(1.0, "first"), ms(10));
    r.progress("c1", report(2.0, "replaced"), ms(20));
    r.progress("c1", report(3.0, "last"), ms(30));
    assert_eq!(progress_of(&mut r), ["first"]);
    r.feed(&ev(OUTPUT), ms(40));
    let observations: Vec<Observation> = r.take_observations().into_iter().flatten().collect();
    let messages: Vec<_> = observations
        .iter()
        .filter_map(|o| match o {
            Observation::Progress { report, .. } => report.message.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        messages,
        ["last"],
        "the last report goes out before the end"
    );
    let finished = observations
        .iter()
        .find_map(|o| match o {
            Observation::CallFinished {
                error_kind, output, ..
            } => Some((error_kind.clone(), output.clone())),
            _ => None,
        })
        .expect("finished");
    assert_eq!(finished, (None, Some("8 results".to_string())));

    // Without asking, no output; a call closed at EOF fails with `no_output`.
    let mut r = rewriter(0);
    r.feed(&ev(ADDED), ms(0));
    r.feed(&ev(DONE), ms(1));
    r.finish(ms(2));
    let finished = r
        .take_observations()
        .into_iter()
        .flatten()
        .find_map(|o| match o {
            Observation::CallFinished {
                error_kind, output, ..
            } => Some((error_kind, output)),
            _ => None,
        })
        .expect("finished");
    assert_eq!(finished, (Some("no_output".to_string()), None));
}
