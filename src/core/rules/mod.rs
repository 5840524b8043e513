//! The rules of a Responses stream that toolpulse repairs (or works around) where the upstream
//! breaks them: one list (docs/stream-rules.md), counted per stream in [`Violations`] and
//! exported as `toolpulse_upstream_violations_total{rule}`; the invariant checker holds every
//! output to the same list. The item rules are counted as the rewriter reads (`Items`).

pub mod items;

/// A rule of the stream that an upstream broke, and what toolpulse did about it. The order is
/// docs/stream-rules.md's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// An event of a response carried an id other than its `response.created`'s (LiteLLM's
    /// terminal event does): the created id is put back, and the next turn's
    /// `previous_response_id` mapped to the gateway's.
    ResponseId,
    /// An `output_item.added` not at the next free index (a gap, or an index already used):
    /// forwarded as it is.
    ItemIndex,
    /// An item id added twice in one response: forwarded as it is.
    ItemIdRepeated,
    /// An `output_item.done` at an index where no item was added (LiteLLM's `mcp_list_tools`):
    /// dropped with the call's events where it lies at a hosted call's index, else forwarded.
    ItemDoneNotAdded,
    /// An `output_item.done` whose item has another id or type than the one added at its
    /// index: forwarded as it is (dropped where it lies at a hosted call's index).
    ItemChanged,
    /// An event that names an item (`output_index`, `item_id`) not added at that index, or
    /// another item than the one there: forwarded as it is. Counted where toolpulse reads the
    /// event (text deltas are read only while numbers shift or a call is open).
    UnknownItem,
    /// The terminal event's `response.output` leaves out an item added, lists one twice, or
    /// lists them out of index order (LiteLLM's leaves out its `function_call`): forwarded as
    /// it is. Counted by the invariant checker only (the runtime would have to parse every
    /// terminal listing).
    ListingIncomplete,
    /// The output of a hosted call, or the gateway's own hosted item folded into one, could
    /// not give up its index (a later index was already used): forwarded as it is.
    HostedOutputIndex,
    /// A `sequence_number` that does not grow: a new run of numbers starts there, unshifted.
    SequenceRestart,
    /// A `function_call` done that was never added: the call starts at its done.
    CallDoneNotAdded,
    /// A `function_call` whose item id is the one of a call still open: not tracked (its
    /// events would be indistinguishable from the first call's).
    CallItemIdRepeated,
}

impl Rule {
    pub const ALL: [Rule; 11] = [
        Rule::ResponseId,
        Rule::ItemIndex,
        Rule::ItemIdRepeated,
        Rule::ItemDoneNotAdded,
        Rule::ItemChanged,
        Rule::UnknownItem,
        Rule::ListingIncomplete,
        Rule::HostedOutputIndex,
        Rule::SequenceRestart,
        Rule::CallDoneNotAdded,
        Rule::CallItemIdRepeated,
    ];

    /// The `rule` label of `toolpulse_upstream_violations_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::ResponseId => "response_id",
            Rule::ItemIndex => "item_index",
            Rule::ItemIdRepeated => "item_id_repeated",
            Rule::ItemDoneNotAdded => "item_done_not_added",
            Rule::ItemChanged => "item_changed",
            Rule::UnknownItem => "unknown_item",
            Rule::ListingIncomplete => "listing_incomplete",
            Rule::HostedOutputIndex => "hosted_output_index",
            Rule::SequenceRestart => "sequence_restart",
            Rule::CallDoneNotAdded => "call_done_not_added",
            Rule::CallItemIdRepeated => "call_item_id_repeated",
        }
    }
}

/// How often each rule was broken in one stream.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Violations([u64; Rule::ALL.len()]);

impl Violations {
    pub fn count(&mut self, rule: Rule) {
        self.add(rule, 1);
    }

    /// Counts `rule` broken `n` more times.
    pub fn add(&mut self, rule: Rule, n: u64) {
        self.0[rule as usize] += n;
    }

    pub fn get(&self, rule: Rule) -> u64 {
        self.0[rule as usize]
    }

    pub fn any(&self) -> bool {
        self.0.iter().any(|&n| n > 0)
    }

    /// The rules broken, with their counts.
    pub fn broken(&self) -> impl Iterator<Item = (Rule, u64)> + '_ {
        Rule::ALL
            .into_iter()
            .map(|rule| (rule, self.get(rule)))
            .filter(|(_, n)| *n > 0)
    }
}

/// `rule=count` pairs of the rules broken, for a log line.
impl std::fmt::Display for Violations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (rule, n)) in self.broken().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{}={n}", rule.as_str())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_its_own_slot_and_label() {
        let mut v = Violations::default();
        for (i, rule) in Rule::ALL.into_iter().enumerate() {
            assert_eq!(rule as usize, i);
            for _ in 0..=i {
                v.count(rule);
            }
        }
        let broken: Vec<_> = v.broken().map(|(r, n)| (r.as_str(), n)).collect();
        assert_eq!(broken[..2], [("response_id", 1), ("item_index", 2)]);
        assert_eq!(broken.len(), Rule::ALL.len());
        assert!(v.to_string().starts_with("response_id=1 item_index=2 "));
        assert!(v.any() && !Violations::default().any());
    }
}
