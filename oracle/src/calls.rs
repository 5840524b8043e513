//! The calls and companion items the output has announced: every opening event closed exactly
//! once, every companion added once and done once, lifecycle events on items the client has,
//! at their item's index, and companions listed after their call in `response.output`.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::indices::Indices;
use super::{COMPANION_PREFIX, Responses, Step, index_of, lifecycle_step};

/// A companion item as last announced.
struct Companion {
    index: Option<u64>,
    item: Value,
    done: bool,
}

/// The companion item type of a lifecycle event family (`response.mcp_call` → `mcp_call`).
fn item_type(family: &str) -> &str {
    family.strip_prefix("response.").unwrap_or(family)
}

#[derive(Default)]
pub struct Calls {
    /// Item ids and call ids of `function_call` items the client has seen.
    known_items: HashSet<String>,
    companions: HashMap<String, Companion>,
    /// Companion ids added in the current response, for `response.output` lists.
    in_response: HashSet<String>,
    indices: Indices,
    pub open: HashSet<(String, String)>,
    closed: HashSet<(String, String)>,
    responses: Responses,
}

impl Calls {
    /// An upstream event as the client got it (`checked`: its numbers could be read, i.e. it
    /// was within the size limit).
    pub fn see_upstream(
        &mut self,
        input: Option<&Map<String, Value>>,
        output: &Map<String, Value>,
        checked: bool,
    ) -> Result<(), String> {
        let kind = output.get("type").and_then(Value::as_str);
        if self.responses.starts_another(output) {
            self.indices = Indices::default();
            self.in_response.clear();
        }
        let item = output.get("item");
        if item.and_then(|i| i.get("type")).and_then(Value::as_str) == Some("function_call") {
            for key in ["id", "call_id"] {
                if let Some(id) = item.and_then(|i| i.get(key)).and_then(Value::as_str) {
                    self.known_items.insert(id.to_string());
                }
            }
        }
        if !checked {
            return Ok(());
        }
        let introduces = matches!(
            kind,
            Some("response.output_item.added" | "response.output_item.done")
        );
        if let (Some(upstream), Some(client)) = (input.and_then(index_of), index_of(output))
            && (introduces || self.indices.knows(upstream))
        {
            self.indices.upstream(upstream, client)?;
        }
        self.check_listing(output)
    }

    /// Each listed `function_call` with a companion in this response is followed by it, in its
    /// latest state.
    fn check_listing(&self, output: &Map<String, Value>) -> Result<(), String> {
        let Some(items) = output
            .get("response")
            .and_then(|r| r.get("output"))
            .and_then(Value::as_array)
        else {
            return Ok(());
        };
        for (k, item) in items.iter().enumerate() {
            if item.get("type").and_then(Value::as_str) != Some("function_call") {
                continue;
            }
            let Some(call_id) = item.get("call_id").and_then(Value::as_str) else {
                continue;
            };
            let id = format!("{COMPANION_PREFIX}{call_id}");
            if !self.in_response.contains(&id) {
                continue;
            }
            let latest = &self.companions[&id].item;
            if items.get(k + 1) != Some(latest) {
                return Err(format!(
                    "response.output lists call {call_id:?} without its companion {id} after it"
                ));
            }
        }
        Ok(())
    }

    pub fn see_injected(&mut self, json: &Map<String, Value>) -> Result<(), String> {
        let kind = json["type"].as_str().unwrap_or_default();
        if let Some(item) = json.get("item") {
            return self.see_companion(kind, item, index_of(json));
        }
        let (family, id, step) = lifecycle_step(kind, json)?;
        if let Some(companion) = self.companions.get(&id) {
            if companion.done {
                return Err(format!("{kind} for companion {id} after it was done"));
            }
            if item_type(&family) != companion.item["type"] {
                return Err(format!("{kind} for a {} companion", companion.item["type"]));
            }
            if index_of(json) != companion.index {
                return Err(format!("{kind} not at its companion's output_index"));
            }
        } else if !self.known_items.contains(&id) {
            return Err(format!(
                "{kind} for call {id:?}, which the client has not seen"
            ));
        }
        let key = (family, id);
        if step != Step::Open && self.closed.contains(&key) {
            return Err(format!("{kind} for call {:?} after it was closed", key.1));
        }
        match step {
            Step::Open if !self.open.insert(key.clone()) => {
                Err(format!("a second opening event for call {:?}", key.1))
            }
            // An id seen again after its call was closed starts a new call.
            Step::Open => {
                self.closed.remove(&key);
                Ok(())
            }
            _ if !self.open.contains(&key) => Err(format!(
                "{kind} for call {:?} without its opening event",
                key.1
            )),
            Step::Middle => Ok(()),
            Step::Close => {
                self.open.remove(&key);
                self.closed.insert(key);
                Ok(())
            }
        }
    }

    /// An injected `response.output_item.added`/`done` of a companion.
    fn see_companion(
        &mut self,
        kind: &str,
        item: &Value,
        index: Option<u64>,
    ) -> Result<(), String> {
        let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
        let Some(call_id) = id.strip_prefix(COMPANION_PREFIX) else {
            return Err(format!("an injected item with id {id:?}"));
        };
        let item_kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        if !matches!(
            item_kind,
            "mcp_call" | "web_search_call" | "file_search_call"
        ) {
            return Err(format!("an injected item of type {item_kind:?}"));
        }
        let status = item.get("status").and_then(Value::as_str);
        match kind {
            "response.output_item.added" => {
                if !self.known_items.contains(call_id) {
                    return Err(format!("companion {id} for a call the client has not seen"));
                }
                if self.companions.get(id).is_some_and(|c| !c.done) {
                    return Err(format!("companion {id} added twice"));
                }
                if status != Some("in_progress") {
                    return Err(format!("companion {id} added with status {status:?}"));
                }
                let index = index.ok_or("a companion without its output_index")?;
                self.indices.companion(index)?;
                self.in_response.insert(id.to_string());
                let companion = Companion {
                    index: Some(index),
                    item: item.clone(),
                    done: false,
                };
                self.companions.insert(id.to_string(), companion);
                Ok(())
            }
            "response.output_item.done" => {
                let Some(companion) = self.companions.get_mut(id).filter(|c| !c.done) else {
                    return Err(format!("companion {id} done without being added, or twice"));
                };
                if companion.index != index || companion.item["type"] != item_kind {
                    return Err(format!("companion {id} done with another index or type"));
                }
                if !matches!(status, Some("completed" | "failed")) {
                    return Err(format!("companion {id} done with status {status:?}"));
                }
                let family = format!("response.{item_kind}");
                if self.open.contains(&(family, id.to_string())) {
                    return Err(format!("companion {id} done before its terminal event"));
                }
                companion.done = true;
                companion.item = item.clone();
                Ok(())
            }
            _ => Err(format!("{kind} carries an item")),
        }
    }

    /// Companions added and never done.
    pub fn unfinished(&self) -> Vec<&str> {
        let open = self.companions.iter().filter(|(_, c)| !c.done);
        open.map(|(id, _)| id.as_str()).collect()
    }
}
