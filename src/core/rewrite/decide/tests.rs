//! The quick way of deciding an event read for its numbers alone, checked against the whole
//! way (`Stream::read_whole`): the same bytes, stats and observations for streams of text and
//! tool calls that shift numbers and indices, under every presentation, fed in pieces, resumed
//! or not.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use crate::config::Config;
use crate::core::profiles::Profile;
use crate::core::rewrite::{Observation, Rewriter, Stats};

/// The profile sets the comparison runs under (one per presentation, with the payload ones).
const PROFILES: &[&[Profile]] = &[
    &[],
    &[Profile::Hosted],
    &[Profile::OpenAi],
    &[Profile::OpenAiInline],
    &[
        Profile::Hosted,
        Profile::Progress,
        Profile::Stages,
        Profile::ToolCall,
        Profile::Tool,
    ],
    &[Profile::OpenAi, Profile::Stages, Profile::ToolCall],
    &[Profile::OpenAiInline, Profile::Tool],
];

/// One upstream event of a generated stream: `seq` its number, `call` the call it concerns,
/// `index` its `output_index`. Text deltas of every shape the scan meets (the usual one,
/// without a number or an index, with an index that is no plain number, with numbers nested
/// or quoted, broken JSON, a number split across `data` lines), and the events of calls,
/// hosted items and responses that shift numbers and indices.
fn event(kind: u8, seq: u64, call: u64, index: u64) -> String {
    let delta = "response.output_text.delta";
    let data = match kind {
        0 => format!(
            r#"{{"type":"{delta}","sequence_number":{seq},"item_id":"msg_1","output_index":{index},"content_index":0,"delta":"some words "}}"#
        ),
        1 => format!(
            r#"{{"type":"{delta}","sequence_number":{seq},"item_id":"mcp_{call}","delta":"x"}}"#
        ),
        2 => format!(
            r#"{{"type":"{delta}","sequence_number":{seq},"item_id":"mcp_{call}","output_index":{index}.5}}"#
        ),
        3 => format!(
            r#"{{"type":"{delta}","x":{{"sequence_number":7,"type":"t"}},"sequence_number":{seq},"output_index":{index},"delta":"\"sequence_number\":1 é\n"}}"#
        ),
        4 => format!(r#"{{"type":"{delta}","output_index":{index},"delta":"no number"}}"#),
        5 => format!(
            r#"{{"type":"{delta}","sequence_number":{seq},"output_index":{index},"delta":"x""#
        ),
        6 => format!(
            "{{ \"type\" : \"{delta}\" ,\n\"sequence_number\" : {seq} , \"output_index\" : {index} }}"
        ),
        7 => {
            return format!(
                "event: {delta}\ndata: {{\"type\":\"{delta}\",\"sequence_number\":{seq}\ndata: 0,\"output_index\":{index}}}\n\n"
            );
        }
        8 => format!(
            r#"{{"type":"response.output_item.added","sequence_number":{seq},"output_index":{index},"item":{{"id":"fc_{call}","type":"function_call","name":"web_search","call_id":"c{call}","arguments":""}}}}"#
        ),
        9 => format!(
            r#"{{"type":"response.output_item.done","sequence_number":{seq},"output_index":{index},"item":{{"id":"fc_{call}","type":"function_call","name":"web_search","call_id":"c{call}","arguments":"{{}}"}}}}"#
        ),
        10 => format!(
            r#"{{"type":"response.output_item.added","sequence_number":{seq},"output_index":{index},"item":{{"id":"o_{call}","type":"function_call_output","call_id":"c{call}","output":"3 results","status":"completed"}}}}"#
        ),
        11 => format!(
            r#"{{"type":"response.output_item.done","sequence_number":{seq},"output_index":{index},"item":{{"id":"mcp_{call}","type":"web_search_call","name":"web_search","status":"completed"}}}}"#
        ),
        12 => format!(
            r#"{{"type":"response.function_call_arguments.delta","sequence_number":{seq},"item_id":"fc_{call}","output_index":{index},"delta":"{{}}"}}"#
        ),
        13 => format!(
            r#"{{"type":"response.created","sequence_number":{seq},"response":{{"id":"resp_{call}","output":[]}}}}"#
        ),
        14 => format!(
            r#"{{"type":"response.completed","sequence_number":{seq},"response":{{"id":"resp_{call}","output":[{{"id":"msg_1","type":"message"}}]}}}}"#
        ),
        15 => return ": keep-alive\n\n".into(),
        16 => return "data: [DONE]\n\n".into(),
        // The line names a quiet type the data does not have.
        _ => {
            return format!(
                "event: {delta}\ndata: {{\"type\":\"response.output_item.added\",\"sequence_number\":{seq},\"output_index\":{index},\"item\":{{\"id\":\"fc_{call}\",\"type\":\"function_call\",\"name\":\"web_search\",\"call_id\":\"c{call}\",\"arguments\":\"\"}}}}\n\n"
            );
        }
    };
    let kind = data.split('"').nth(3).unwrap_or("x").to_string();
    format!("event: {kind}\ndata: {data}\n\n")
}

/// What a rewriter gives for `input` fed in pieces of `chunk` bytes: its bytes, stats and
/// observations.
fn run(r: &mut Rewriter, input: &[u8], chunk: usize) -> (Vec<u8>, Stats, Vec<Observation>) {
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut observations = Vec::new();
    for (i, piece) in input.chunks(chunk.max(1)).enumerate() {
        let now = t0 + Duration::from_millis(i as u64 * 7);
        out.extend_from_slice(&r.feed(piece, now));
        out.extend_from_slice(&r.on_idle(now));
        observations.extend(r.take_observations().into_iter().flatten());
    }
    out.extend_from_slice(&r.finish(t0 + Duration::from_secs(60)));
    observations.extend(r.take_observations().into_iter().flatten());
    (out, r.stats(), observations)
}

/// Both ways, on the same stream.
fn both(input: &[u8], profiles: &[Profile], resume: Option<u64>, chunk: usize) {
    let settings = Config::default().settings();
    let rewriter = |read_whole: bool| {
        let mut r = Rewriter::new(settings.clone()).with_profiles(profiles.to_vec());
        if let Some(n) = resume {
            r = r.resume_after(n);
        }
        r.stream.read_whole = read_whole;
        r
    };
    let quick = run(&mut rewriter(false), input, chunk);
    let whole = run(&mut rewriter(true), input, chunk);
    let show = String::from_utf8_lossy(input);
    assert_eq!(
        String::from_utf8_lossy(&quick.0),
        String::from_utf8_lossy(&whole.0),
        "{profiles:?} {show}"
    );
    assert_eq!(quick.1, whole.1, "stats, {profiles:?} {show}");
    assert_eq!(quick.2, whole.2, "observations, {profiles:?} {show}");
}

/// A stream of `steps`: each an event kind, a call, an index, and whether the numbers restart.
fn stream(steps: &[(u8, u64, u64, bool)]) -> Vec<u8> {
    let mut seq = 0;
    let mut out = String::new();
    for &(kind, call, index, restart) in steps {
        if restart {
            seq = 0;
        }
        out += &event(kind, seq, call, index);
        seq += 1;
    }
    out.into_bytes()
}

/// A web search shown as a hosted item (its call's and its output's events dropped, later
/// indices moved down) or beside a companion (later indices moved up), the gateway's own item
/// for it, then text deltas of every shape at each of those indices: each way of shifting
/// numbers and indices, under every profile set.
#[test]
fn numbers_alone_decide_as_the_whole_way_after_a_call() {
    let mut steps = vec![(13, 1, 0, false), (8, 1, 0, false), (9, 1, 0, false)];
    steps.extend((0..8).map(|k| (k, 1, 0, false)));
    steps.push((10, 1, 1, false));
    steps.extend((0..8).map(|k| (k, 1, 1, false)));
    steps.push((11, 1, 2, false));
    steps.extend((0..8).map(|k| (k, 1, 3, false)));
    steps.push((14, 1, 0, false));
    let input = stream(&steps);
    for profiles in PROFILES {
        for chunk in [usize::MAX, 1, 17] {
            both(&input, profiles, None, chunk);
        }
        both(&input, profiles, Some(6), usize::MAX);
    }
}

proptest! {
    #[test]
    fn numbers_alone_decide_as_the_whole_way(
        steps in proptest::collection::vec((0u8..18, 0u64..3, 0u64..4, proptest::bool::weighted(0.05)), 0..40),
        profiles in proptest::sample::select(PROFILES),
        resume in proptest::option::weighted(0.2, 0u64..20),
        chunk in prop_oneof![Just(usize::MAX), 1usize..200],
    ) {
        both(&stream(&steps), profiles, resume, chunk);
    }
}
