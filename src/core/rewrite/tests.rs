//! Unit tests of the rewriter with an explicit clock: durations, heartbeats, the end of the
//! stream. Whole-stream behaviour is covered by the golden fixtures in `tests/`.

use std::time::Duration;

use super::unread::MAX_UNREAD_COPY;
use super::*;
use crate::config::Config;
use crate::core::lifecycle::Progress;

const ADDED: &str = r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","name":"web_search","call_id":"c1","arguments":""}}"#;
const DONE: &str = r#"{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","name":"web_search","call_id":"c1","arguments":"{}"}}"#;
const OUTPUT: &str = r#"{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"id":"o_1","type":"function_call_output","call_id":"c1","output":"8 results","status":"completed"}}"#;

fn ev(json: &str) -> Vec<u8> {
    let kind = json.split('"').nth(3).expect("type first");
    format!("event: {kind}\ndata: {json}\n\n").into_bytes()
}

/// A rewriter with the companion shape (`openai`), which these tests are written against;
/// `hosted` has its own tests below and in `profiles::hosted`.
fn rewriter(heartbeat_ms: u64) -> Rewriter {
    Rewriter::new(
        Config {
            heartbeat: Duration::from_millis(heartbeat_ms),
            ..Config::default()
        }
        .settings(),
    )
    .with_profiles(vec![Profile::OpenAi])
}

fn text(b: &Bytes) -> &str {
    std::str::from_utf8(b).expect("utf-8")
}

/// Feeds `input` in one chunk and finishes; the output must keep the invariants.
fn whole_stream(r: &mut Rewriter, input: &[u8], now: Instant) -> String {
    let mut out = r.feed(input, now).to_vec();
    out.extend_from_slice(&r.finish(now));
    // The oracle (a dev-dependency that depends on this crate) links a second copy of the crate
    // into these tests; only bytes pass between them, so no type of one meets the other's.
    invariants::check(input, &out, usize::MAX).expect("invariants");
    String::from_utf8(out).expect("utf-8")
}

/// The first event of `text` that mentions `kind`.
fn event_of<'a>(text: &'a str, kind: &str) -> Option<&'a str> {
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

/// The pieces `feed_bytes` returns for a stream fed in `chunk`-byte pieces, each with whether
/// it is a slice of the chunk it came from (not copied).
fn pieces_of(input: &[u8], chunk: usize) -> (Vec<u8>, usize) {
    let now = Instant::now();
    let mut r = rewriter(0);
    let (mut out, mut copied) = (Vec::new(), 0);
    for part in input.chunks(chunk) {
        let part = Bytes::copy_from_slice(part);
        let range = part.as_ptr_range();
        for piece in r.feed_bytes(part.clone(), now) {
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
        .any(|o| matches!(o, Observation::CallRunning { ref call_id, .. } if call_id == "c1"));
    assert!(running);
    r.progress("c1", report(1.0, "first"), ms(10));
    r.progress("c1", report(2.0, "replaced"), ms(20));
    r.progress("c1", report(3.0, "last"), ms(30));
    assert_eq!(progress_of(&mut r), ["first"]);
    r.feed(&ev(OUTPUT), ms(40));
    let observations: Vec<Observation> = r.take_observations().collect();
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
        .find_map(|o| match o {
            Observation::CallFinished {
                error_kind, output, ..
            } => Some((error_kind, output)),
            _ => None,
        })
        .expect("finished");
    assert_eq!(finished, (Some("no_output".to_string()), None));
}

/// Profile `hosted`: the item is in progress the moment the call is added (before its arguments
/// and its run), nothing of the gateway's pair reaches the client, and the items after it move
/// down into the index the output gave up.
#[test]
fn hosted_items_open_with_the_call_and_later_items_move_down() {
    let t0 = Instant::now();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let added = r.feed(&ev(ADDED), t0);
    let added = text(&added);
    assert!(
        added.starts_with("event: response.output_item.added\n"),
        "{added}"
    );
    assert!(added.contains(r#""type":"web_search_call""#), "{added}");
    assert!(
        added.contains("response.web_search_call.in_progress"),
        "{added}"
    );
    assert!(
        !added.contains("function_call"),
        "the gateway's call is hidden: {added}"
    );
    let running = r.feed(&ev(DONE), t0);
    assert!(text(&running).contains("response.web_search_call.searching"));
    assert!(!text(&running).contains("function_call"));
    let output = r.feed(&ev(OUTPUT), t0 + Duration::from_millis(300));
    let output = text(&output);
    assert!(!output.contains("function_call_output"), "{output}");
    let done = event_of(output, "response.output_item.done").expect("the item's end");
    assert!(done.contains(r#""status":"completed""#), "{done}");
    let message = r#"{"type":"response.output_item.added","sequence_number":4,"output_index":2,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}"#;
    let message = r.feed(&ev(message), t0);
    assert!(
        text(&message).contains(r#""sequence_number":6,"output_index":1,"#),
        "numbered after the item's 6 events, at the index the output gave up: {}",
        text(&message)
    );
}

/// A call whose name the request declares as a `function` tool is the client's: never hidden.
#[test]
fn hosted_leaves_the_clients_declared_functions_alone() {
    let t0 = Instant::now();
    let input = [ev(ADDED), ev(DONE), ev(OUTPUT)].concat();
    let mut r = rewriter(0)
        .with_profiles(vec![Profile::Hosted])
        .with_client_functions(vec!["web_search".into()]);
    let out = whole_stream(&mut r, &input, t0);
    assert_eq!(out.as_bytes(), &input[..], "untouched");
    let mut r = rewriter(0)
        .with_profiles(vec![Profile::Hosted])
        .with_client_functions(vec!["lookup".into()]);
    let out = whole_stream(&mut r, &input, t0);
    assert!(out.contains("web_search_call") && !out.contains("\"function_call\""));
}

/// The gateway's own hosted item after the model's function_call (LiteLLM): folded into the item
/// toolpulse opened at the call, its state the call's result; another kind or name is not.
#[test]
fn hosted_folds_the_gateways_own_item_of_the_same_call() {
    let t0 = Instant::now();
    let native = |seq: u32, kind: &str, name: &str, done: bool, extra: &str| {
        let event = if done { "done" } else { "added" };
        ev(&format!(
            r#"{{"type":"response.output_item.{event}","sequence_number":{seq},"output_index":1,"item":{{"id":"ws_9","type":"{kind}","name":"{name}","status":"completed"{extra}}}}}"#
        ))
    };
    let in_progress = ev(
        r#"{"type":"response.web_search_call.in_progress","sequence_number":4,"output_index":1,"item_id":"ws_9"}"#,
    );
    let input = [
        ev(ADDED),
        ev(DONE),
        native(3, "web_search_call", "web_search", false, ""),
        in_progress.clone(),
        native(
            5,
            "web_search_call",
            "web_search",
            true,
            r#","error":{"code":"x"}"#,
        ),
    ]
    .concat();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = whole_stream(&mut r, &input, t0);
    assert!(!out.contains("ws_9"), "folded: {out}");
    let done = event_of(&out, "response.output_item.done").expect("the item's end");
    assert!(done.contains(r#""status":"failed""#), "its error: {done}");
    assert_eq!(out.matches("event: response.output_item.added").count(), 1);
    // A native item of another kind is another item: it passes.
    let input = [
        ev(ADDED),
        ev(DONE),
        native(3, "file_search_call", "web_search", false, ""),
    ]
    .concat();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = r.feed(&input, t0);
    assert!(text(&out).contains("ws_9"), "{}", text(&out));
}

/// The gateway's own item after a later index was used cannot give its index up: it is shown as
/// it is (with its events), and still ends toolpulse's item with its state.
#[test]
fn hosted_shows_a_native_item_that_cannot_give_up_its_index() {
    let t0 = Instant::now();
    let message = ev(
        r#"{"type":"response.output_item.added","sequence_number":3,"output_index":2,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}"#,
    );
    let native = |seq: u32, event: &str| {
        ev(&format!(
            r#"{{"type":"response.output_item.{event}","sequence_number":{seq},"output_index":1,"item":{{"id":"ws_9","type":"web_search_call","status":"completed"}}}}"#
        ))
    };
    let in_progress = ev(
        r#"{"type":"response.web_search_call.in_progress","sequence_number":5,"output_index":1,"item_id":"ws_9"}"#,
    );
    let input = [
        ev(ADDED),
        ev(DONE),
        message,
        native(4, "added"),
        in_progress,
        native(6, "done"),
    ]
    .concat();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = whole_stream(&mut r, &input, t0);
    let out = out.as_str();
    assert_eq!(
        out.matches("\"id\":\"ws_9\"").count(),
        2,
        "added and done: {out}"
    );
    assert!(out.contains("\"item_id\":\"ws_9\""), "its events: {out}");
    let done = event_of(out, "\"status\":\"completed\",\"action\"").expect("toolpulse's done");
    assert!(done.contains("tph_"), "{done}");
    assert_eq!(r.stats().violations.get(Rule::HostedOutputIndex), 1);
}

/// Events before the first `response.created` belong to the response it opens (fuzz finding
/// `items-before-response-created`): the hosted item opened before it stands in its call's place
/// in the terminal listing, as it would had the call come after it.
#[test]
fn hosted_items_before_response_created_belong_to_its_response() {
    let t0 = Instant::now();
    let created =
        ev(r#"{"type":"response.created","sequence_number":0,"response":{"id":"r1","output":[]}}"#);
    let completed = ev(
        r#"{"type":"response.completed","sequence_number":4,"response":{"id":"r1","output":[{"id":"fc_1","type":"function_call","name":"web_search","call_id":"c1","arguments":"{}"},{"type":"message","id":"msg_1"}]}}"#,
    );
    let input = [ev(ADDED), created, ev(DONE), ev(OUTPUT), completed].concat();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = whole_stream(&mut r, &input, t0);
    let listing = event_of(&out, "response.completed").expect("the terminal event");
    assert!(
        !listing.contains("\"fc_1\""),
        "the call is hidden: {listing}"
    );
    let hosted = listing.find("\"tph_").expect("the hosted item listed");
    assert!(
        hosted < listing.find("msg_1").expect("the message"),
        "{listing}"
    );
    assert_eq!(listing.matches("\"tph_").count(), 1, "{listing}");
}

/// A response that ends without a terminal event has its open calls closed in it, before the
/// next `response.created` (fuzz finding `response-completed-then-call-again`): every item is
/// done in the response that added it.
#[test]
fn calls_a_response_leaves_open_close_before_the_next_response() {
    let t0 = Instant::now();
    let created =
        ev(r#"{"type":"response.created","sequence_number":0,"response":{"id":"r1","output":[]}}"#);
    let input = [created.clone(), ev(ADDED), ev(DONE), created].concat();
    for profile in [Profile::Hosted, Profile::OpenAi] {
        let mut r = rewriter(0).with_profiles(vec![profile]);
        let out = whole_stream(&mut r, &input, t0);
        let second = out
            .rfind("event: response.created")
            .expect("the second response");
        let (first, second) = out.split_at(second);
        let closed = r#""type":"response.output_item.done","sequence_number":"#;
        assert!(first.contains(r#""status":"failed""#), "{profile:?}: {out}");
        assert!(!second.contains(closed), "{profile:?}: {out}");
    }
}

/// An event of a hidden `function_call` that names it by `item_id` without an `output_index`
/// (a broken upstream) is hidden with it (fuzz finding `crash-d7ff1442…`).
#[test]
fn hosted_hides_events_naming_the_call_item_without_an_index() {
    let t0 = Instant::now();
    let delta = ev(
        r#"{"type":"response.function_call_arguments.done","sequence_number":2,"item_id":"fc_1","arguments":"{}"}"#,
    );
    let input = [ev(ADDED), delta].concat();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = whole_stream(&mut r, &input, t0);
    assert!(!out.contains("fc_1"), "{out}");
}

/// The gateway's own item is folded only into a hosted item still open: not into a call the
/// gateway adds again under a call id whose hosted item is done (fuzz finding `crash-021c42a7…`).
#[test]
fn hosted_folds_no_native_item_into_a_call_id_added_again() {
    let t0 = Instant::now();
    let again = ADDED.replace(
        r#""sequence_number":1,"output_index":0"#,
        r#""sequence_number":4,"output_index":2"#,
    );
    let native = ev(
        r#"{"type":"response.output_item.done","sequence_number":5,"output_index":3,"item":{"id":"ws_9","type":"web_search_call","name":"web_search","status":"completed"}}"#,
    );
    let input = [ev(ADDED), ev(DONE), ev(OUTPUT), ev(&again), native].concat();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = whole_stream(&mut r, &input, t0);
    assert!(out.contains("\"id\":\"ws_9\""), "shown as it is: {out}");
}

/// A gateway whose terminal event names another response id than `response.created` (LiteLLM):
/// the created id is put back, whatever the profile, and the gateway's id observed for the next
/// turn. The data's `type` says what the event is, whatever its `event:` line says (as clients
/// read it).
#[test]
fn a_changed_response_id_is_mended_and_observed() {
    let created =
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_A","output":[]}}"#;
    let completed = r#"{"type":"response.completed","sequence_number":1,"response":{"id":"resp_B","output":[]}}"#;
    for profiles in [vec![Profile::Hosted], vec![Profile::OpenAi], vec![]] {
        let mut r = rewriter(0).with_profiles(profiles);
        let input = [ev(created), ev(completed)].concat();
        let out = whole_stream(&mut r, &input, Instant::now());
        assert_eq!(
            out,
            text(&Bytes::from(
                [ev(created), ev(&completed.replace("resp_B", "resp_A"))].concat()
            ))
        );
        assert_eq!(r.stats().violations.get(Rule::ResponseId), 1);
        let seen: Vec<_> = r.take_observations().collect();
        assert!(
            seen.contains(&Observation::ResponseId {
                shown: "resp_A".into(),
                upstream: "resp_B".into()
            }),
            "{seen:?}"
        );
    }
    let mut r = rewriter(0);
    let odd = format!("event: response.output_text.delta\ndata: {completed}\n\n");
    let input = [ev(created).as_slice(), odd.as_bytes()].concat();
    let out = whole_stream(&mut r, &input, Instant::now());
    assert!(out.ends_with(&odd.replace("resp_B", "resp_A")), "{out}");
    assert_eq!(r.stats().violations.get(Rule::ResponseId), 1);
}

/// An `event:` line that lies about its data's `type` (fuzz finding `crash-9dd4dac5…`): the
/// event is read for what its data says, as clients read it. A hosted call added under a line
/// that calls it something else is hidden at once, its item open from the call's start.
#[test]
fn an_event_is_what_its_data_says_whatever_its_line_says() {
    let t0 = Instant::now();
    for line in [
        "response.output_item.adde\u{ff}d",
        "response.output_text.delta",
    ] {
        let added = format!("event: {line}\ndata: {ADDED}\n\n");
        let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
        let out = r.feed(added.as_bytes(), t0);
        let out = text(&out);
        assert!(
            out.contains("response.web_search_call.in_progress"),
            "{out}"
        );
        assert!(!out.contains("\"function_call\""), "{out}");
        let input = [added.into_bytes(), ev(DONE), ev(OUTPUT)].concat();
        let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
        let out = whole_stream(&mut r, &input, t0);
        assert_eq!(
            out.matches("\"output_index\":0").count(),
            out.matches("\"output_index\"").count(),
            "{out}"
        );
    }
    // A later `type` member overrides the first (as every JSON reader takes it).
    let twice = ADDED.replacen(
        r#"{"type":"response.output_item.added","#,
        r#"{"type":"response.output_text.delta","type":"response.output_item.added","#,
        1,
    );
    let event = format!("event: response.output_text.delta\ndata: {twice}\n\n");
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = r.feed(event.as_bytes(), t0);
    assert!(
        text(&out).contains("response.web_search_call.in_progress"),
        "{}",
        text(&out)
    );
}

/// LiteLLM 1.108.7's MCP stream breaks two rules the rewriter counts as it reads: the
/// `mcp_list_tools` done at the function_call's index, and the changed response id.
#[test]
fn litellm_breaks_the_item_and_id_rules() {
    let input =
        include_bytes!("../../../tests/fixtures/recordings/litellm-1.108.7/mcp_lookup_user.sse");
    for profiles in [vec![Profile::Hosted], vec![]] {
        let mut r = rewriter(0).with_profiles(profiles);
        whole_stream(&mut r, input, Instant::now());
        let broken: Vec<_> = r.stats().violations.broken().collect();
        assert_eq!(broken, [(Rule::ResponseId, 1), (Rule::ItemChanged, 1)]);
    }
    let clean =
        include_bytes!("../../../tests/fixtures/recordings/litellm-1.108.7/function_tool.sse");
    let mut r = rewriter(0);
    whole_stream(&mut r, clean, Instant::now());
    assert!(!r.stats().violations.any(), "{}", r.stats().violations);
}

/// The core's own repairs are counted as rules too: a call done but never added starts at its
/// done, a number that does not grow starts a new run.
#[test]
fn the_cores_repairs_are_counted() {
    let mut r = rewriter(0);
    let created = r#"{"type":"response.created","sequence_number":0}"#;
    let input = [ev(DONE), ev(created), ev(OUTPUT)].concat();
    whole_stream(&mut r, &input, Instant::now());
    let v = r.stats().violations;
    assert_eq!(v.get(Rule::CallDoneNotAdded), 1, "{v}");
    assert_eq!(v.get(Rule::SequenceRestart), 1, "{v}");
}
