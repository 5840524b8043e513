//! Unit tests of presentation `hosted` in the rewriter (hosted items open with their call,
//! later items move down, the gateway's own items fold in, responses keep their own state), and
//! of the stream rules the rewriter repairs or counts.

use std::time::Duration;

use super::tests::{ADDED, DONE, OUTPUT, ev, event_of, rewriter, text, whole_stream};
use super::*;

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

/// A hosted call the response ends without closing is closed before the response's terminal
/// event, never after it: a client stops reading at `response.completed`.
#[test]
fn a_call_left_open_closes_before_the_terminal_event() {
    let t0 = Instant::now();
    let completed = ev(
        r#"{"type":"response.completed","sequence_number":3,"response":{"id":"r1","output":[]}}"#,
    );
    let input = [ev(ADDED), ev(DONE), completed].concat();
    let mut r = rewriter(0).with_profiles(vec![Profile::Hosted]);
    let out = whole_stream(&mut r, &input, t0);
    let terminal = out.find("event: response.completed").expect("the end");
    let closed = out
        .find(r#""type":"response.output_item.done""#)
        .expect("the item closed");
    assert!(closed < terminal, "{out}");
    assert!(out.contains(r#""status":"failed""#), "{out}");
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
        let seen: Vec<_> = r.take_observations().into_iter().flatten().collect();
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
