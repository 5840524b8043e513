//! The item rules, counted as the rewriter reads a response's events: each item added at the
//! next free index with an id of its own, done as the item added there, and every event that
//! names an item (`output_index`) naming one added. Items are remembered by the hashes of their
//! id's and type's JSON text, at most [`MAX_ITEMS`] per response (past it, the rest of the
//! response is not counted), so memory stays bounded whatever a response holds.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

use super::{Rule, Violations};

/// Items followed per response.
pub const MAX_ITEMS: usize = 4096;

/// Item ids are the upstream's: foldhash's per-process random seed keeps them from choosing
/// collisions.
type Hasher = foldhash::fast::RandomState;

/// The raw JSON texts of an item's `id` and `type`, as the upstream wrote them, in an
/// `output_item.added` or (`done`) `.done`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItemHead<'a> {
    pub id: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub done: bool,
}

#[derive(Debug, Default)]
pub struct Items {
    /// The index the next item must be added at, once one was.
    next: Option<u64>,
    /// Per index, the hashes of the id and type of the item added there.
    added: HashMap<u64, (u64, u64), Hasher>,
    ids: HashSet<u64, Hasher>,
    hasher: Hasher,
    /// More than [`MAX_ITEMS`] items: not counted for the rest of the response.
    full: bool,
}

impl Items {
    fn hash(&self, text: Option<&str>) -> u64 {
        self.hasher.hash_one(text)
    }

    /// An `output_item.added` or `.done` at `index`.
    pub fn item(&mut self, index: u64, item: ItemHead<'_>, v: &mut Violations) {
        if item.done {
            self.done(index, item, v)
        } else {
            self.added(index, item, v)
        }
    }

    /// An `output_item.added` at `index`.
    pub fn added(&mut self, index: u64, item: ItemHead<'_>, v: &mut Violations) {
        if self.full {
            return;
        }
        if self.next.is_some_and(|n| n != index) || self.added.contains_key(&index) {
            v.count(Rule::ItemIndex);
        }
        let id = self.hash(item.id);
        if item.id.is_some() && !self.ids.insert(id) {
            v.count(Rule::ItemIdRepeated);
        }
        let kind = self.hash(item.kind);
        self.added.insert(index, (id, kind));
        self.next = Some(index.saturating_add(1));
        self.full = self.added.len() >= MAX_ITEMS;
    }

    /// An `output_item.done` at `index`.
    pub fn done(&self, index: u64, item: ItemHead<'_>, v: &mut Violations) {
        if self.full {
            return;
        }
        match self.added.get(&index) {
            None => v.count(Rule::ItemDoneNotAdded),
            Some(&(id, kind)) if id != self.hash(item.id) || kind != self.hash(item.kind) => {
                v.count(Rule::ItemChanged)
            }
            Some(_) => {}
        }
    }

    /// Another event at `index` (a delta, a part, a tool's progress).
    pub fn named(&self, index: u64, v: &mut Violations) {
        if !self.full && !self.added.contains_key(&index) {
            v.count(Rule::UnknownItem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head<'a>(id: &'a str, kind: &'a str) -> ItemHead<'a> {
        ItemHead {
            id: Some(id),
            kind: Some(kind),
            done: false,
        }
    }

    #[test]
    fn counts_what_litellm_and_others_break() {
        let mut items = Items::default();
        let mut v = Violations::default();
        // LiteLLM: a function_call at 0, an mcp_list_tools done at 0 never added.
        items.added(0, head("\"fc_1\"", "\"function_call\""), &mut v);
        items.done(0, head("\"mcp_L\"", "\"mcp_list_tools\""), &mut v);
        items.done(0, head("\"fc_1\"", "\"function_call\""), &mut v);
        items.named(0, &mut v);
        assert_eq!(v.get(Rule::ItemChanged), 1);
        assert!(!v.broken().any(|(r, _)| r != Rule::ItemChanged), "{v}");
        items.done(5, head("\"x\"", "\"message\""), &mut v);
        items.named(6, &mut v);
        items.added(3, head("\"fc_1\"", "\"message\""), &mut v);
        items.added(3, head("\"m\"", "\"message\""), &mut v);
        for rule in [
            Rule::ItemDoneNotAdded,
            Rule::UnknownItem,
            Rule::ItemIdRepeated,
        ] {
            assert_eq!(v.get(rule), 1, "{rule:?}: {v}");
        }
        assert_eq!(v.get(Rule::ItemIndex), 2, "a gap, then an index reused");
        let mut items = Items::default();
        let mut fresh = Violations::default();
        items.added(1, head("\"fc_1\"", "\"function_call\""), &mut fresh);
        items.added(2, ItemHead::default(), &mut fresh);
        items.added(3, ItemHead::default(), &mut fresh);
        assert!(!fresh.any(), "1-based, and items without ids: {fresh}");
    }

    #[test]
    fn memory_is_bounded_per_response() {
        let mut items = Items::default();
        let mut v = Violations::default();
        for i in 0..(MAX_ITEMS as u64 + 10) {
            items.added(i, ItemHead::default(), &mut v);
        }
        assert_eq!(items.added.len(), MAX_ITEMS);
        items.done(u64::MAX, ItemHead::default(), &mut v);
        assert!(!v.any());
    }
}
