//! `output_index` within one response, as the client sees it: an upstream item keeps one index
//! on all its events, items keep their upstream order, no two items (companions included) share
//! an index, and a companion takes an index above every one used before it.

use std::collections::{BTreeMap, BTreeSet};

/// Indices this high are forwarded as they are (see `rewrite::index::MAX_INDEX`).
const MAX_INDEX: u64 = 1 << 32;

#[derive(Default)]
pub struct Indices {
    /// Upstream index → the client's.
    items: BTreeMap<u64, u64>,
    companions: BTreeSet<u64>,
    max_used: Option<u64>,
}

impl Indices {
    /// Whether an item has this upstream index.
    pub fn knows(&self, upstream: u64) -> bool {
        self.items.contains_key(&upstream)
    }

    pub fn upstream(&mut self, upstream: u64, client: u64) -> Result<(), String> {
        if upstream >= MAX_INDEX {
            return match client == upstream {
                true => Ok(()),
                false => Err(format!("index {upstream} was changed to {client}")),
            };
        }
        if let Some(&before) = self.items.get(&upstream) {
            if before != client {
                return Err(format!(
                    "the item at upstream index {upstream} moved from {before} to {client}"
                ));
            }
            return Ok(());
        }
        let below = self.items.range(..upstream).next_back();
        let above = self.items.range(upstream + 1..).next();
        if below.is_some_and(|b| *b.1 >= client) || above.is_some_and(|a| *a.1 <= client) {
            return Err(format!(
                "upstream index {upstream} became {client}, out of the upstream's order"
            ));
        }
        if self.companions.contains(&client) {
            return Err(format!(
                "upstream index {upstream} took companion index {client}"
            ));
        }
        self.items.insert(upstream, client);
        self.max_used = self.max_used.max(Some(client));
        Ok(())
    }

    pub fn companion(&mut self, client: u64) -> Result<(), String> {
        if self.max_used.is_some_and(|m| client <= m) {
            return Err(format!(
                "companion index {client} is not above {:?}, already used",
                self.max_used
            ));
        }
        self.companions.insert(client);
        self.max_used = Some(client);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule() {
        let mut ix = Indices::default();
        ix.upstream(0, 0).expect("ok");
        ix.companion(1).expect("ok");
        ix.upstream(1, 2).expect("shifted");
        assert!(ix.upstream(1, 3).is_err(), "moved");
        assert!(ix.companion(2).is_err(), "not above");
        assert!(ix.upstream(5, 1).is_err(), "order");
        ix.companion(3).expect("ok");
        assert!(ix.upstream(2, 3).is_err(), "companion's index");
    }
}
