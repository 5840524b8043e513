//! `output_index` of one response as the client sees it, once companion items are added.
//!
//! A companion takes the index after every index the response has used; upstream items first
//! seen after it move up by one. With `b_k` the highest upstream index seen when companion `k`
//! (1-based) opened, an upstream index `u` maps to `u + #{k : b_k < u}` and companion `k` sits
//! at `b_k + k`. Since `b_k` only grows, the map is strictly increasing (upstream items keep
//! their order and stay unique), never meets a companion's index, and never changes for an
//! index already seen (a later companion has `b >= u`), whatever order the upstream uses.
//!
//! Profile `hosted` gives indices up instead: an upstream item that is hidden (a
//! `function_call_output` folded into its hosted item) frees its index `r`, and every later
//! upstream index moves down by one. `r` can be given up only when it is above every index
//! seen, so that no index the client already has changes.
//!
//! Memory: one run per distinct `b_k`, at most [`MAX_RUNS`]; past that no companion opens. As
//! many removals at most; past that an index is not given up.

/// Distinct boundaries kept per response (parallel calls opened together share one).
pub const MAX_RUNS: usize = 1024;

/// Indices at or above this are beyond what any client handles: they are not mapped, and no
/// companion is placed there.
pub const MAX_INDEX: u64 = 1 << 32;

#[derive(Debug, Default, Clone)]
pub struct OutputIndices {
    /// The highest upstream index seen in this response.
    max_seen: Option<u64>,
    /// `(b, companions opened up to and including this run)`, `b` non-decreasing; `None` (no
    /// index seen yet) sorts first.
    runs: Vec<(Option<u64>, u64)>,
    /// Upstream indices given up, increasing.
    removed: Vec<u64>,
}

impl OutputIndices {
    /// Whether upstream indices can change (so every event must be read).
    pub fn is_shifting(&self) -> bool {
        !self.runs.is_empty() || !self.removed.is_empty()
    }

    fn companions(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.1)
    }

    /// Notes an upstream index as seen.
    fn saw(&mut self, upstream: u64) {
        if upstream < MAX_INDEX {
            self.max_seen = self.max_seen.max(Some(upstream));
        }
    }

    /// The client's index for upstream index `upstream`, which is now seen.
    pub fn map(&mut self, upstream: u64) -> u64 {
        if upstream >= MAX_INDEX {
            return upstream;
        }
        self.saw(upstream);
        // Companions whose boundary lies below `upstream`: runs are sorted by boundary.
        let below = self.runs.partition_point(|r| r.0 < Some(upstream));
        let shift = below.checked_sub(1).map_or(0, |i| self.runs[i].1);
        let removed = self.removed.partition_point(|&r| r < upstream) as u64;
        (upstream + shift).saturating_sub(removed)
    }

    /// Gives up upstream index `upstream` (its item is hidden): later indices move down by one.
    /// Refused (`false`) when an index at or above it was already seen, or past the limits.
    pub fn remove(&mut self, upstream: u64) -> bool {
        if upstream >= MAX_INDEX
            || self.max_seen.is_some_and(|m| m >= upstream)
            || self.removed.len() >= MAX_RUNS
        {
            return false;
        }
        self.max_seen = Some(upstream);
        self.removed.push(upstream);
        true
    }

    /// Opens a companion: its index, above every index used so far; `None` past the limits.
    pub fn open_companion(&mut self) -> Option<u64> {
        let k = self.companions() + 1;
        let index = self.max_seen.map_or(k - 1, |b| b + k);
        if index >= MAX_INDEX {
            return None;
        }
        let full = self.runs.len() >= MAX_RUNS;
        match self.runs.last_mut() {
            Some(run) if run.0 == self.max_seen => run.1 = k,
            _ if full => return None,
            _ => self.runs.push((self.max_seen, k)),
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sequential_calls_put_each_companion_after_its_call() {
        let mut ix = OutputIndices::default();
        assert_eq!(ix.map(0), 0, "reasoning");
        assert_eq!(ix.map(1), 1, "function_call");
        assert_eq!(ix.open_companion(), Some(2));
        assert_eq!(ix.map(2), 3, "function_call_output");
        assert_eq!(ix.map(1), 1, "the call keeps its index");
        assert_eq!(ix.map(3), 4, "next call");
        assert_eq!(ix.open_companion(), Some(5));
        assert_eq!(ix.map(4), 6);
        assert_eq!(ix.map(2), 3);
        let mut ix = OutputIndices::default();
        assert!(!ix.is_shifting());
        assert_eq!(ix.map(0), 0);
    }

    #[test]
    fn parallel_calls_and_no_index_seen() {
        let mut ix = OutputIndices::default();
        assert_eq!(ix.open_companion(), Some(0), "nothing seen yet");
        assert_eq!(ix.map(0), 1);
        ix.map(1);
        assert_eq!(ix.open_companion(), Some(3));
        assert_eq!(ix.open_companion(), Some(4));
        assert_eq!(ix.map(2), 5);
        assert_eq!(ix.runs.len(), 2, "companions opened together share a run");
    }

    #[test]
    fn removed_indices_move_later_items_down() {
        let mut ix = OutputIndices::default();
        assert_eq!(ix.map(0), 0, "hosted item at the call's index");
        assert_eq!(ix.map(1), 1, "a second call");
        assert!(ix.remove(2), "the first output");
        assert!(ix.remove(3), "the second output");
        assert!(ix.is_shifting());
        assert_eq!(ix.map(4), 2, "the message");
        assert_eq!(ix.map(1), 1, "an index already seen keeps its place");
        assert!(!ix.remove(3), "seen already");
        assert!(!ix.remove(1), "seen already");
        let mut ix = OutputIndices::default();
        assert!(ix.remove(1), "an antwort gap before it");
        assert_eq!(ix.map(2), 1);
    }

    #[test]
    fn huge_indices_are_left_alone() {
        let mut ix = OutputIndices::default();
        ix.map(MAX_INDEX - 1);
        assert_eq!(ix.open_companion(), None);
        assert_eq!(ix.map(u64::MAX), u64::MAX);
    }

    proptest! {
        /// Whatever the upstream order: every index the client sees is unique per item, stable,
        /// in the upstream's order, and companions sit above everything used before them.
        #[test]
        fn unique_stable_ordered(steps in proptest::collection::vec(prop_oneof![
            (0u64..40).prop_map(Step::Map),
            Just(Step::Companion),
            (0u64..40).prop_map(Step::Remove),
        ], 0..80), hosted in any::<bool>()) {
            let mut ix = OutputIndices::default();
            let mut items = std::collections::HashMap::new();
            let mut used = HashSet::new();
            let mut companions = HashSet::new();
            let mut removed = HashSet::new();
            for step in steps {
                match step {
                    // One presentation per stream: companions, or hosted removals.
                    Step::Companion if hosted => continue,
                    Step::Remove(_) if !hosted => continue,
                    Step::Remove(r) => {
                        if items.contains_key(&r) || removed.contains(&r) {
                            prop_assert!(!ix.remove(r), "index {} seen, yet given up", r);
                        } else if ix.remove(r) {
                            removed.insert(r);
                        }
                    }
                    Step::Map(u) if removed.contains(&u) => continue,
                    Step::Map(u) => {
                        let c = ix.map(u);
                        let first = *items.entry(u).or_insert(c);
                        prop_assert_eq!(first, c, "index of item {} changed", u);
                        prop_assert!(!companions.contains(&c), "item {} on a companion's index", u);
                        used.insert(c);
                    }
                    Step::Companion => {
                        let Some(c) = ix.open_companion() else { continue };
                        prop_assert!(used.iter().all(|&x| x < c), "companion {} not above {:?}", c, used);
                        used.insert(c);
                        companions.insert(c);
                    }
                }
            }
            let mut by_upstream: Vec<_> = items.into_iter().collect();
            by_upstream.sort();
            prop_assert!(by_upstream.windows(2).all(|w| w[0].1 < w[1].1));
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Map(u64),
        Companion,
        Remove(u64),
    }
}
