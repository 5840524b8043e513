//! The checker for outputs of profile `hosted` (docs/hosted.md), written from the contract and
//! not from the rewriter's code: it finds the hosted items in the output (ids `tph_`), works out
//! from the input which upstream items they replace, and checks that
//!
//! 1. every other upstream event reaches the output, in order, changed only in its numbers
//!    (and, where it lists `response.output`, in that list: hosted items where their calls
//!    were, in their last state, and no hidden output);
//! 2. every hosted item is added once (in progress), opened by exactly one `in_progress`, closed
//!    by exactly one terminal event, then done once; each of its events names it by id and index,
//!    with the family of its type;
//! 3. `sequence_number`s are consecutive wherever the input's were;
//! 4. the client's rules hold on the output where they held on the input: items added at the
//!    next index, each item-scoped event at an item already added, of its id.

use std::collections::{HashMap, HashSet};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use toolpulse::core::sse::Event;

use super::{PAYLOAD_TYPES, Report, Responses, json_of, lifecycle_step, split};

const PREFIX: &str = "tph_";

/// Whether `output` shows hosted items (then [`check`] applies rather than the companion one).
pub fn applies(output: &[u8]) -> bool {
    memchr::memmem::find(output, b"\"tph_").is_some()
}

/// The `call_id` a hosted id carries.
fn call_id_of(id: &str) -> Option<String> {
    let encoded = id.strip_prefix(PREFIX)?.split('.').next()?;
    String::from_utf8(URL_SAFE_NO_PAD.decode(encoded).ok()?).ok()
}

fn text<'a>(json: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    json.get(key).and_then(Value::as_str)
}

fn item_field<'a>(json: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    json.get("item")
        .and_then(|i| i.get(key))
        .and_then(Value::as_str)
}

fn index(json: &Map<String, Value>) -> Option<u64> {
    json.get("output_index").and_then(Value::as_u64)
}

fn number(json: &Map<String, Value>) -> Option<u64> {
    json.get("sequence_number").and_then(Value::as_u64)
}

/// What one response of the output shows: its hosted items (call id → hosted id, by the
/// response they were added in), the outputs it shows as they are, and the gateway's own hosted
/// items folded into them (item id → hosted id).
#[derive(Default)]
struct Shown {
    hosted: HashMap<String, String>,
    outputs: HashSet<String>,
    /// Every item id the output adds or finishes (to tell the folded native items).
    ids: HashSet<String>,
    /// The hosted items in the order they were added: type, name, id.
    order: Vec<(String, Option<String>, String)>,
    natives: HashMap<String, String>,
}

/// Whether an input event introduces an item: an `output_item.added` or `.done`, by its data's
/// `type` (as clients and the rewriter read it, whatever its `event:` line says).
fn introduces_item(json: &Map<String, Value>) -> bool {
    matches!(
        text(json, "type"),
        Some("response.output_item.added" | "response.output_item.done")
    )
}

/// The types of the native hosted items (OpenAI's, the gateway's own or toolpulse's).
const NATIVE_TYPES: &[&str] = &["mcp_call", "web_search_call", "file_search_call"];

/// The gateway's own hosted items the output never shows are folded into toolpulse's: each
/// into the first hosted item of its response, of its type and name, not yet taken.
fn fold_natives(inputs: &[Option<Map<String, Value>>], responses: &mut [Shown]) {
    let (mut response, mut created) = (0, Responses::default());
    let mut taken: HashSet<String> = HashSet::new();
    for json in inputs.iter().flatten() {
        if created.starts_another(json) {
            response += 1;
            taken.clear();
        }
        let Some(shown) = responses.get_mut(response) else {
            return;
        };
        let (Some(item_type), Some(id)) = (item_field(json, "type"), item_field(json, "id")) else {
            continue;
        };
        if !introduces_item(json)
            || !NATIVE_TYPES.contains(&item_type)
            || id.starts_with(PREFIX)
            || shown.ids.contains(id)
            || shown.natives.contains_key(id)
        {
            continue;
        }
        let name = item_field(json, "name");
        let host = shown.order.iter().find(|(t, n, hosted)| {
            let same_name = name.is_none() || n.is_none() || n.as_deref() == name;
            t == item_type && same_name && !taken.contains(hosted)
        });
        if let Some((_, _, hosted)) = host {
            taken.insert(hosted.clone());
            shown.natives.insert(id.to_string(), hosted.clone());
        }
    }
}

/// A hosted item as the output showed it.
#[derive(Default)]
struct Hosted {
    kind: String,
    index: Option<u64>,
    opened: bool,
    closed: bool,
    done: bool,
    last: Value,
}

pub fn check(input: &[u8], output: &[u8], max_event_bytes: usize) -> Result<Report, String> {
    let (inputs, input_tail) = split(input);
    let (outputs, output_tail) = split(output);
    if output_tail != input_tail {
        return Err("the unterminated tail of the input is not the end of the output".into());
    }
    let ends_inside_oversize = input_tail.len() > max_event_bytes;
    let in_json: Vec<Option<Map<String, Value>>> = inputs.iter().map(json_of).collect();
    let out_json: Vec<Option<Map<String, Value>>> = outputs.iter().map(json_of).collect();

    // Per response (counted by [`Responses`], in the input and the output alike): the
    // calls shown as hosted items, and the outputs shown as they are.
    let mut responses: Vec<Shown> = vec![Shown::default()];
    let mut created = Responses::default();
    for json in out_json.iter().flatten() {
        if created.starts_another(json) {
            responses.push(Shown::default());
        }
        let shown = responses.last_mut().ok_or("no response")?;
        let Shown {
            hosted,
            outputs,
            ids,
            order,
            ..
        } = shown;
        // A hosted item belongs to the response it was added in (a call a response leaves
        // open without a terminal event closes before the next `response.created`).
        let added = text(json, "type") == Some("response.output_item.added");
        if let Some(id) = item_field(json, "id") {
            ids.insert(id.to_string());
        }
        if let Some(id) = item_field(json, "id").filter(|id| added && id.starts_with(PREFIX)) {
            let call_id = call_id_of(id).ok_or(format!("hosted id {id:?} names no call"))?;
            hosted.insert(call_id, id.to_string());
            let item_type = item_field(json, "type").unwrap_or_default().to_string();
            let name = item_field(json, "name").map(str::to_string);
            order.push((item_type, name, id.to_string()));
        }
        if item_field(json, "type") == Some("function_call_output")
            && let Some(call_id) = item_field(json, "call_id")
        {
            outputs.insert(call_id.to_string());
        }
    }
    // An event over the size limit goes by unread: never hidden, its number unknown.
    let in_unread: Vec<bool> = inputs
        .iter()
        .map(|e| e.raw().len() > max_event_bytes)
        .collect();
    let out_unread: Vec<bool> = outputs
        .iter()
        .map(|e| e.raw().len() > max_event_bytes)
        .collect();
    fold_natives(&in_json, &mut responses);
    let hidden = hidden_inputs(&in_json, &in_unread, &responses);
    let expected: Vec<usize> = (0..inputs.len()).filter(|i| !hidden[*i]).collect();

    let mut report = Report::default();
    let mut items: HashMap<String, Hosted> = HashMap::new();
    let mut payload_open = HashSet::new();
    let mut next = 0;
    let (mut response, mut created) = (0, Responses::default());
    for (k, out) in outputs.iter().enumerate() {
        let at = |e: String| format!("output event {k}: {e}");
        response += usize::from(
            out_json[k]
                .as_ref()
                .is_some_and(|j| created.starts_another(j)),
        );
        if let Some(&i) = expected.get(next)
            && matches(
                &inputs[i],
                &in_json[i],
                out,
                &out_json[k],
                &responses[response],
                &items,
            )
            .map_err(at)?
        {
            next += 1;
            report.upstream_events += 1;
            report.renumbered += usize::from(inputs[i].raw() != out.raw());
            continue;
        }
        if &out.raw()[..] == toolpulse::core::sse::HEARTBEAT {
            report.heartbeats += 1;
            continue;
        }
        let json = out_json[k]
            .as_ref()
            .ok_or_else(|| at("neither upstream nor JSON".into()))?;
        let kind = text(json, "type").unwrap_or_default();
        if json.contains_key("error") && !PAYLOAD_TYPES.contains(&kind) {
            let wanted = expected
                .get(next)
                .map(|&i| String::from_utf8_lossy(inputs[i].raw()));
            return Err(at(format!(
                "an injected event with a top-level `error` (the next upstream event due: {wanted:?})"
            )));
        }
        report.injected_events += 1;
        if PAYLOAD_TYPES.contains(&kind) {
            let (family, id, step) = lifecycle_step(kind, json).map_err(at)?;
            let key = (family, id);
            match step {
                super::Step::Open if !payload_open.insert(key.clone()) => {
                    return Err(at(format!("{kind} opened twice")));
                }
                super::Step::Close if !payload_open.remove(&key) => {
                    return Err(at(format!("{kind} without its opening")));
                }
                _ => {}
            }
            continue;
        }
        see_hosted_event(kind, json, &mut items).map_err(at)?;
    }
    if next != expected.len() {
        return Err(format!(
            "input event {} of {} never reached the output",
            expected[next],
            inputs.len()
        ));
    }
    if !ends_inside_oversize {
        if let Some((id, _)) = items.iter().find(|(_, h)| !h.done) {
            return Err(format!("hosted item {id} never done"));
        }
        if let Some(key) = payload_open.iter().next() {
            return Err(format!("{key:?} never closed"));
        }
    }
    check_numbers(&in_json, &in_unread, &out_json, &out_unread)?;
    super::rules::kept(&in_json, &out_json)?;
    Ok(report)
}

/// Which input events belong to hidden items: the `function_call` of a hosted call, its
/// `function_call_output` unless the output shows it, and every event at their indices.
fn hidden_inputs(
    inputs: &[Option<Map<String, Value>>],
    unread: &[bool],
    responses: &[Shown],
) -> Vec<bool> {
    let mut hidden_indices = HashSet::new();
    let mut hidden_items = HashSet::new();
    let (mut response, mut created) = (0, Responses::default());
    let none = Shown::default();
    inputs
        .iter()
        .zip(unread)
        .map(|(json, &unread)| {
            let Some(json) = json.as_ref().filter(|_| !unread) else {
                return false;
            };
            if created.starts_another(json) {
                hidden_indices.clear();
                hidden_items.clear();
                response += 1;
            }
            let shown = responses.get(response).unwrap_or(&none);
            // Only `output_item.added`/`.done` introduce an item (as the rewriter reads them):
            // another event carrying one (a broken type) is not the call's item.
            let call_id = item_field(json, "call_id")
                .filter(|c| introduces_item(json) && shown.hosted.contains_key(*c));
            let folded = item_field(json, "id").is_some_and(|id| shown.natives.contains_key(id));
            let hides = folded
                || match (item_field(json, "type"), call_id) {
                    (Some("function_call"), Some(_)) => true,
                    (Some("function_call_output"), Some(c)) => !shown.outputs.contains(c),
                    _ => false,
                };
            if hides {
                hidden_indices.extend(index(json));
                hidden_items.extend(item_field(json, "id").map(str::to_string));
                return true;
            }
            index(json).is_some_and(|i| hidden_indices.contains(&i))
                || text(json, "item_id").is_some_and(|id| hidden_items.contains(id))
        })
        .collect()
}

/// Whether output event `out` is input event `inp`, changed only as allowed (an error when it
/// is changed beyond that).
fn matches(
    inp: &Event,
    inp_json: &Option<Map<String, Value>>,
    out: &Event,
    out_json: &Option<Map<String, Value>>,
    shown: &Shown,
    items: &HashMap<String, Hosted>,
) -> Result<bool, String> {
    if inp.raw() == out.raw() {
        return Ok(true);
    }
    let (Some(a), Some(b)) = (inp_json, out_json) else {
        return Ok(false);
    };
    let strip = |json: &Map<String, Value>| {
        let mut json = json.clone();
        json.remove("sequence_number");
        json.remove("output_index");
        if let Some(Value::Object(response)) = json.get_mut("response") {
            response.remove("output");
        }
        json
    };
    if strip(a) != strip(b) {
        return Ok(false);
    }
    let listed = |json: &Map<String, Value>| {
        json.get("response")
            .and_then(|r| r.get("output"))
            .and_then(Value::as_array)
            .cloned()
    };
    match (listed(a), listed(b)) {
        (None, None) => {}
        (Some(before), Some(after)) => {
            // The input's list with each hosted call replaced by its item where its call (or
            // the gateway's own item for it) was first, its output left out.
            let mut want = Vec::new();
            let mut placed = HashSet::new();
            for item in before {
                let call_id = item.get("call_id").and_then(Value::as_str);
                let kind = item.get("type").and_then(Value::as_str);
                let native = item
                    .get("id")
                    .and_then(Value::as_str)
                    .and_then(|id| shown.natives.get(id));
                let hosted = match kind {
                    Some("function_call") => call_id.and_then(|c| shown.hosted.get(c)),
                    Some(k) if NATIVE_TYPES.contains(&k) => native,
                    _ => None,
                };
                match (kind, call_id.and_then(|c| shown.hosted.get(c)), hosted) {
                    (Some("function_call_output"), Some(_), _) if !after.contains(&item) => {}
                    (_, _, Some(id)) if !placed.insert(id.clone()) => {}
                    (_, _, Some(id)) => match items.get(id) {
                        Some(h) => want.push(h.last.clone()),
                        None => want.push(item),
                    },
                    _ => want.push(item),
                }
            }
            if want != after {
                return Err("response.output does not list the hosted items where their calls were, in their last state".into());
            }
        }
        _ => return Err("response.output appeared or went".into()),
    }
    if !super::upstream::same_but_digits(inp.raw(), out.raw()) && listed(a).is_none() {
        return Err("changed beyond its numbers".into());
    }
    Ok(true)
}

/// An injected event of a hosted item.
fn see_hosted_event(
    kind: &str,
    json: &Map<String, Value>,
    items: &mut HashMap<String, Hosted>,
) -> Result<(), String> {
    if let Some(item) = json.get("item") {
        let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
        let item_kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        if !id.starts_with(PREFIX)
            || !matches!(
                item_kind,
                "mcp_call" | "web_search_call" | "file_search_call"
            )
        {
            return Err(format!("an injected {item_kind:?} item with id {id:?}"));
        }
        let status = item.get("status").and_then(Value::as_str);
        match kind {
            "response.output_item.added" => {
                if items.contains_key(id) {
                    return Err(format!("hosted item {id} added twice"));
                }
                if status != Some("in_progress") {
                    return Err(format!("hosted item {id} added {status:?}"));
                }
                let hosted = Hosted {
                    kind: item_kind.to_string(),
                    index: index(json),
                    last: item.clone(),
                    ..Hosted::default()
                };
                items.insert(id.to_string(), hosted);
            }
            "response.output_item.done" => {
                let h = items.get_mut(id).ok_or(format!("{id} done, never added"))?;
                if h.done || !h.closed {
                    return Err(format!("{id} done twice or before its terminal event"));
                }
                if h.kind != item_kind || h.index != index(json) {
                    return Err(format!("{id} done with another type or index"));
                }
                if !matches!(status, Some("completed" | "failed")) {
                    return Err(format!("{id} done {status:?}"));
                }
                h.done = true;
                h.last = item.clone();
            }
            _ => return Err(format!("{kind} carries an item")),
        }
        return Ok(());
    }
    let id = text(json, "item_id").ok_or(format!("{kind} without item_id"))?;
    let h = items.get_mut(id).ok_or(format!(
        "{kind} for {id:?}, an item the client does not have"
    ))?;
    let (family, step) = kind
        .rsplit_once('.')
        .ok_or(format!("event type {kind:?}"))?;
    let family = family.strip_prefix("response.").unwrap_or(family);
    let family = family.strip_suffix("_arguments").unwrap_or(family);
    if family != h.kind {
        return Err(format!("{kind} names a {} item", h.kind));
    }
    if index(json) != h.index {
        return Err(format!("{kind} not at its item's output_index"));
    }
    if h.done || h.closed {
        return Err(format!("{kind} for {id} after it was closed"));
    }
    match step {
        "in_progress" if h.opened => return Err(format!("a second {kind}")),
        "in_progress" => h.opened = true,
        _ if !h.opened => return Err(format!("{kind} before in_progress")),
        "completed" | "failed" => h.closed = true,
        "searching" | "progress" | "delta" | "done" => {}
        _ => return Err(format!("unknown event type {kind:?}")),
    }
    Ok(())
}

/// Output numbers are consecutive within each response wherever the input's were.
fn check_numbers(
    inputs: &[Option<Map<String, Value>>],
    in_unread: &[bool],
    outputs: &[Option<Map<String, Value>>],
    out_unread: &[bool],
) -> Result<(), String> {
    // Dense from the first number on, and again after each event that went by unread.
    let dense = |events: &[Option<Map<String, Value>>], unread: &[bool]| -> Result<(), String> {
        let mut last: Option<u64> = None;
        for (json, &unread) in events.iter().zip(unread) {
            if unread {
                last = None;
                continue;
            }
            let Some(n) = json.as_ref().and_then(number) else {
                continue;
            };
            match last {
                Some(prev) if n != prev + 1 && n > prev => {
                    return Err(format!("sequence_number {n} after {prev}"));
                }
                _ => last = Some(n),
            }
        }
        Ok(())
    };
    if dense(inputs, in_unread).is_ok() {
        dense(outputs, out_unread)?;
    }
    Ok(())
}
