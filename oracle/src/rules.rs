//! The strict clients' rules (docs/stream-rules.md), counted over a whole stream read as JSON,
//! apart from the rewriter's own counting: toolpulse must not break a rule its input kept.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use toolpulse::core::rules::{Rule, Violations};

use super::COMPANION_PREFIX;

const CREATED: &str = "response.created";
const ADDED: &str = "response.output_item.added";
const DONE: &str = "response.output_item.done";
const TERMINAL: &[&str] = &[
    "response.completed",
    "response.failed",
    "response.incomplete",
];

/// How often `events` (an output or an input, each event's data as JSON) break each rule.
pub fn count(events: &[Option<Map<String, Value>>]) -> Violations {
    let mut v = Violations::default();
    let mut response = Response::default();
    for json in events.iter().flatten() {
        let kind = text(json, "type").unwrap_or_default();
        let response_id = json
            .get("response")
            .and_then(|r| r.get("id"))
            .and_then(Value::as_str);
        if kind == CREATED {
            response = Response {
                id: response_id.map(str::to_string),
                ..Response::default()
            };
            continue;
        }
        if let (Some(id), Some(created)) = (response_id, &response.id)
            && id != created
        {
            v.count(Rule::ResponseId);
        }
        if TERMINAL.contains(&kind) {
            response.listing(json, &mut v);
        }
        let Some(index) = json.get("output_index").and_then(Value::as_u64) else {
            continue;
        };
        let item = json.get("item").and_then(Value::as_object);
        let item_text = |key: &str| item.and_then(|i| text(i, key)).map(str::to_string);
        let (id, item_kind) = (item_text("id"), item_text("type"));
        match kind {
            ADDED => {
                if response.next.is_some_and(|n| n != index) || response.items.contains_key(&index)
                {
                    v.count(Rule::ItemIndex);
                }
                if let Some(id) = &id
                    && !response.ids.insert(id.clone())
                {
                    v.count(Rule::ItemIdRepeated);
                }
                response.items.insert(index, (id, item_kind));
                response.next = Some(index + 1);
            }
            DONE => match response.items.get(&index) {
                None => v.count(Rule::ItemDoneNotAdded),
                Some(added) if *added != (id, item_kind) => v.count(Rule::ItemChanged),
                Some(_) => {}
            },
            _ => match response.items.get(&index) {
                Some((added, _))
                    if text(json, "item_id").is_none_or(|id| Some(id) == added.as_deref()) => {}
                _ => v.count(Rule::UnknownItem),
            },
        }
    }
    v
}

/// An input that keeps every rule (and gives every item event an index, inside a response)
/// must give an output that keeps every rule. (Per rule it cannot be asked: a call left open by
/// a response that broke one may close in the next.)
pub fn kept(
    input: &[Option<Map<String, Value>>],
    output: &[Option<Map<String, Value>>],
) -> Result<(), String> {
    if count(input).any() || !well_formed(input) {
        return Ok(());
    }
    match count(output).broken().next() {
        Some((rule, n)) => Err(format!(
            "the output breaks stream rule {} ({n}×), which the input kept",
            rule.as_str()
        )),
        None => Ok(()),
    }
}

/// Every item event inside a response, with an `output_index`, and no event of a response
/// after its terminal event.
fn well_formed(events: &[Option<Map<String, Value>>]) -> bool {
    let mut open = false;
    events.iter().flatten().all(|json| {
        let kind = text(json, "type").unwrap_or_default();
        if kind == CREATED {
            open = true;
        } else if TERMINAL.contains(&kind) {
            open = false;
        } else if kind.starts_with("response.") && json.get("response").is_none() {
            return open
                && (![ADDED, DONE].contains(&kind)
                    || json.get("output_index").is_some_and(Value::is_u64));
        }
        true
    })
}

/// One response's items so far.
#[derive(Default)]
struct Response {
    id: Option<String>,
    next: Option<u64>,
    /// Per index, the id and type of the item added there.
    items: HashMap<u64, (Option<String>, Option<String>)>,
    ids: HashSet<String>,
}

impl Response {
    /// The terminal listing: every item added, once, in index order (items without an id are
    /// matched by type).
    fn listing(&self, json: &Map<String, Value>, v: &mut Violations) {
        let Some(listed) = json
            .get("response")
            .and_then(|r| r.get("output"))
            .and_then(Value::as_array)
        else {
            return;
        };
        let mut want: Vec<_> = self.items.iter().collect();
        want.sort_by_key(|(index, _)| **index);
        let want: Vec<_> = want.into_iter().map(|(_, item)| item.clone()).collect();
        let got: Vec<_> = listed
            .iter()
            .map(|item| {
                let field = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
                (field("id"), field("type"))
            })
            .collect();
        // Profile `openai`'s companions are listed by a contract of their own (right after
        // their call, once they have a state), which `calls` checks.
        let companion = |item: &(Option<String>, Option<String>)| {
            item.0
                .as_deref()
                .is_some_and(|id| id.starts_with(COMPANION_PREFIX))
        };
        let others = |items: Vec<(Option<String>, Option<String>)>| {
            items
                .into_iter()
                .filter(|i| !companion(i))
                .collect::<Vec<_>>()
        };
        if others(got) != others(want) {
            v.count(Rule::ListingIncomplete);
        }
    }
}

fn text<'a>(json: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    json.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(lines: &[&str]) -> Vec<Option<Map<String, Value>>> {
        lines.iter().map(|l| serde_json::from_str(l).ok()).collect()
    }

    #[test]
    fn litellm_breaks_these_and_a_clean_stream_none() {
        let litellm = events(&[
            r#"{"type":"response.created","response":{"id":"A"}}"#,
            r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"fc","type":"function_call"}}"#,
            r#"{"type":"response.mcp_list_tools.completed","output_index":0,"item_id":"L"}"#,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"L","type":"mcp_list_tools"}}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"id":"m","type":"message"}}"#,
            r#"{"type":"response.completed","response":{"id":"B","output":[{"id":"m","type":"message"}]}}"#,
        ]);
        let v = count(&litellm);
        let broken: Vec<_> = v.broken().map(|(r, n)| (r.as_str(), n)).collect();
        assert_eq!(
            broken,
            [
                ("response_id", 1),
                ("item_changed", 1),
                ("unknown_item", 1),
                ("listing_incomplete", 1)
            ]
        );
        let clean = events(&[
            r#"{"type":"response.created","response":{"id":"A"}}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"id":"m","type":"message"}}"#,
            r#"{"type":"response.output_text.delta","output_index":1,"item_id":"m"}"#,
            r#"{"type":"response.output_item.done","output_index":1,"item":{"id":"m","type":"message"}}"#,
            r#"{"type":"response.completed","response":{"id":"A","output":[{"id":"m","type":"message"}]}}"#,
        ]);
        assert!(!count(&clean).any(), "{}", count(&clean));
        assert!(kept(&litellm, &clean).is_ok());
        assert!(kept(&clean, &litellm).is_err());
        assert!(kept(&clean[1..], &litellm).is_ok(), "outside a response");
    }
}
