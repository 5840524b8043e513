//! Unit tests of what one stream holds for its open calls ([`Rewriter::held_bytes`]): the
//! arguments once, within `[limits] max_open_call_bytes`; calls past the limits left as the
//! upstream sent them; and injections refused past `u64::MAX`.

use std::time::Instant;

use super::*;
use crate::config::Config;

fn ev(json: &str) -> Vec<u8> {
    let kind = json.split('"').nth(3).expect("type first");
    format!("event: {kind}\ndata: {json}\n\n").into_bytes()
}

fn hosted(max_open_call_bytes: usize) -> Rewriter {
    Rewriter::new(
        Config {
            heartbeat: Duration::ZERO,
            limits: crate::config::Limits {
                max_open_call_bytes,
                ..Config::default().limits
            },
            ..Config::default()
        }
        .settings(),
    )
    .with_profiles(vec![Profile::Hosted])
}

/// JSON arguments of `n` bytes, with characters JSON escapes.
fn arguments(n: usize) -> String {
    let head = r#"{"q":""#;
    let body = "a\"b/é".repeat(n);
    let mut text = format!("{head}{body}");
    text.truncate(n - 2);
    while !text.is_char_boundary(text.len()) || text.ends_with('\\') {
        text.pop();
    }
    text.push_str("\"}");
    text
}

/// A call `call_id` at `index`: its `output_item.added` and `.done` events, and its item JSON
/// (done).
fn call(call_id: &str, index: u64, name: &str, args: &str) -> (Vec<u8>, Vec<u8>, String) {
    let item = |args: &str| {
        serde_json::json!({"id": format!("fc_{call_id}"), "type": "function_call",
            "status": "completed", "name": name, "call_id": call_id, "arguments": args})
    };
    let event = |kind: &str, item: serde_json::Value| {
        let json = serde_json::json!({"type": kind, "output_index": index, "item": item});
        ev(&json.to_string())
    };
    let done = item(args);
    (
        event("response.output_item.added", item("")),
        event("response.output_item.done", done.clone()),
        done.to_string(),
    )
}

fn output(call_id: &str, index: u64) -> Vec<u8> {
    let json = serde_json::json!({"type": "response.output_item.done", "output_index": index,
        "item": {"id": format!("o_{call_id}"), "type": "function_call_output",
        "call_id": call_id, "output": "found", "status": "completed"}});
    ev(&json.to_string())
}

/// Four hosted calls with 100 KiB of arguments each: the stream holds each call's arguments
/// once (plus a shell of its item under 1 KiB), not the three copies it once did (the tracker's,
/// the kept item's, ...); the pair handed to the store is the gateway's item all the same.
#[test]
fn an_open_call_holds_its_arguments_once() {
    let t0 = Instant::now();
    let mut r = hosted(crate::config::DEFAULT_MAX_OPEN_CALL_BYTES);
    let args = arguments(100 * 1024);
    let mut items = Vec::new();
    for (i, id) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let (added, done, item) = call(id, i as u64, "web_search", &args);
        r.feed(&[added, done].concat(), t0);
        items.push(item);
    }
    let per_call = r.held_bytes() / 4;
    assert!(
        (args.len()..args.len() + 1024).contains(&per_call),
        "{per_call} bytes held per call for {} of arguments",
        args.len()
    );
    for (i, id) in ["a", "b", "c", "d"].into_iter().enumerate() {
        r.feed(&output(id, 4 + i as u64), t0);
    }
    assert_eq!(
        r.held_bytes(),
        0,
        "what the calls held comes back as they end"
    );
    let pairs: Vec<_> = r
        .take_observations()
        .into_iter()
        .flatten()
        .filter_map(|o| match o {
            Observation::HostedPair { call_item, .. } => Some(call_item),
            _ => None,
        })
        .collect();
    assert_eq!(pairs.len(), 4);
    for (pair, item) in pairs.iter().zip(&items) {
        let value = |text: &str| serde_json::from_str::<serde_json::Value>(text).expect("JSON");
        assert_eq!(
            value(pair),
            value(item),
            "the gateway's own item, arguments put back"
        );
    }
}

/// Past the stream's budget: a call shown already goes on without its arguments (and no pair
/// for the store, which could not give them back), a call not shown yet passes as the upstream
/// sent it, and a name over the cap passes too; the client gets every upstream byte of them.
#[test]
fn calls_past_the_budget_or_the_name_cap_pass_as_sent() {
    let t0 = Instant::now();
    let mut r = hosted(250 * 1024);
    let args = arguments(100 * 1024);
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        let (added, done, _) = call(id, i as u64, "web_search", &args);
        r.feed(&[added, done].concat(), t0);
    }
    assert!(r.held_bytes() <= 250 * 1024 + 3 * 1024);
    // Done without added, past the budget: passes as it came.
    let (_, done, _) = call("e", 3, "web_search", &args);
    assert_eq!(r.feed(&done, t0), done);
    let (added, done, _) = call("f", 4, &"n".repeat(300), "{}");
    let named = [added, done].concat();
    assert_eq!(
        r.feed(&named, t0),
        named,
        "a call with a long name passes as it came"
    );
    r.feed(&output("c", 5), t0);
    let stats = r.stats();
    assert_eq!(stats.untracked.arguments_dropped, 1, "{stats:?}");
    assert_eq!(stats.untracked.held_bytes, 1, "{stats:?}");
    assert_eq!(stats.untracked.name_bytes, 1, "{stats:?}");
    assert_eq!(
        stats.pairs_unkept, 1,
        "no pair without the arguments: {stats:?}"
    );
}

/// An upstream numbering its events up to `u64::MAX`: the events toolpulse would inject after
/// it have no number left, so they stay out (never a second `u64::MAX`), counted once.
#[test]
fn no_injection_after_the_largest_sequence_number() {
    let t0 = Instant::now();
    let max = u64::MAX;
    let mut r = Rewriter::new(
        Config {
            heartbeat: Duration::ZERO,
            ..Config::default()
        }
        .settings(),
    )
    .with_profiles(vec![Profile::OpenAi]);
    let added = format!(
        r#"{{"type":"response.output_item.added","sequence_number":{},"output_index":0,"item":{{"id":"fc_1","type":"function_call","name":"web_search","call_id":"c1","arguments":""}}}}"#,
        max - 1
    );
    let done = format!(
        r#"{{"type":"response.output_item.done","sequence_number":{max},"output_index":0,"item":{{"id":"fc_1","type":"function_call","name":"web_search","call_id":"c1","arguments":"{{}}"}}}}"#
    );
    let input = [ev(&added), ev(&done)].concat();
    let mut out = r.feed(&input, t0).to_vec();
    out.extend_from_slice(&r.finish(t0));
    let text = String::from_utf8(out).expect("utf-8");
    let numbered = format!("\"sequence_number\":{max}");
    assert_eq!(text.matches(&numbered).count(), 1, "{text}");
    assert_eq!(
        text.as_bytes(),
        &input[..],
        "the upstream's events, as they came"
    );
    assert!(r.stats().numbers_exhausted > 0);
}
