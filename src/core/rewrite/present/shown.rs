//! The items toolpulse shows in the current response (companion items, hosted items), each in
//! its latest state, so that an event whose `response.output` lists the items so far
//! (`response.completed`, …) can list them too: a companion right after its `function_call`,
//! a hosted item in its call's place.
//!
//! Memory: at most [`MAX_COMPANION_BYTES`] of item JSON per response; an item past that is
//! still added and done in the stream, only left out of such lists (and counted).

use crate::core::dialect::listing;
use crate::core::rewrite::splice::{Edit, Splice};
use crate::core::sse::NewEvent;

/// Item JSON kept per response for `response.output` lists.
pub const MAX_COMPANION_BYTES: usize = 1 << 20;

#[derive(Debug, Default, Clone)]
pub struct Shown {
    /// `(call_id, item JSON)` in the order the items opened.
    items: Vec<(String, String)>,
    bytes: usize,
}

impl Shown {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether call `call_id` already had an item in this response (a second one would repeat
    /// its id, which clients refuse).
    pub fn contains(&self, call_id: &str) -> bool {
        self.items.iter().any(|(id, _)| id == call_id)
    }

    /// The item JSON of `call_id`, if kept.
    pub fn get(&self, call_id: &str) -> Option<&str> {
        let (_, item) = self.items.iter().find(|(id, _)| id == call_id)?;
        Some(item)
    }

    /// Records the item of `call_id` in its new state; false when the budget leaves it out of
    /// lists.
    pub fn set(&mut self, call_id: &str, item: String) -> bool {
        // From the end: the item updated is most often the one opened last.
        let old = self.items.iter().rposition(|(id, _)| id == call_id);
        let freed = old.map_or(0, |i| self.items[i].1.len());
        if self.bytes - freed + item.len() > MAX_COMPANION_BYTES {
            if let Some(i) = old {
                self.bytes -= freed;
                self.items.remove(i);
            }
            return false;
        }
        self.bytes = self.bytes - freed + item.len();
        match old {
            Some(i) => self.items[i].1 = item,
            None => self.items.push((call_id.to_string(), item)),
        }
        true
    }

    /// Keeps the item of `call_id` in its latest state: the `item` of the events just
    /// rendered for it (`events`). Returns how many states the budget left out of lists.
    pub fn keep(&mut self, call_id: &str, events: &[NewEvent]) -> u64 {
        let mut unlisted = 0;
        for event in events {
            if let Some(item) = event.item_json() {
                // The event's own JSON of it: serde_json writes only valid UTF-8.
                let item = std::str::from_utf8(item).expect("serde_json writes UTF-8");
                let item = item.to_owned();
                unlisted += u64::from(!self.set(call_id, item));
            }
        }
        unlisted
    }

    /// Where to insert what in an event's data that lists the response's output: after each
    /// listed `function_call` that has a companion, `,` and the companion's JSON.
    pub fn insertions(&self, data: &[u8], out: &mut Vec<Edit>) {
        for listed in listing::listed_calls(data) {
            if let Some((_, item)) = self.items.iter().find(|(id, _)| *id == listed.call_id) {
                out.push((listed.end..listed.end, Splice::Text(format!(",{item}"))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_each_companion_after_its_call() {
        let mut c = Shown::default();
        c.set("a", r#"{"id":"tp_a","status":"in_progress"}"#.into());
        c.set("a", r#"{"id":"tp_a","status":"completed"}"#.into());
        let data = br#"{"type":"response.completed","response":{"id":"r","output":[{"type":"function_call","call_id":"a","id":"fc"}, {"type":"function_call","call_id":"b"}]}}"#;
        let mut out = Vec::new();
        c.insertions(data, &mut out);
        assert_eq!(out.len(), 1);
        let (range, Splice::Text(text)) = &out[0] else {
            panic!("a text splice")
        };
        let mut spliced = data[..range.start].to_vec();
        spliced.extend_from_slice(text.as_bytes());
        spliced.extend_from_slice(&data[range.end..]);
        let v: serde_json::Value = serde_json::from_slice(&spliced).expect("valid JSON");
        assert_eq!(v["response"]["output"][1]["status"], "completed");
        assert_eq!(v["response"]["output"][2]["call_id"], "b");
    }

    #[test]
    fn the_budget_leaves_companions_out_of_lists() {
        let mut c = Shown::default();
        assert!(c.set("a", "x".repeat(MAX_COMPANION_BYTES)));
        assert!(!c.set("b", "y".into()), "left out");
        assert!(!c.contains("b"));
        assert!(c.set("a", "z".into()));
        assert!(c.set("b", "y".into()));
        assert!(c.contains("a") && c.contains("b"));
    }
}
