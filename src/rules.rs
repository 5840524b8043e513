//! The rules of a Responses stream that toolpulse repairs (or works around) where the upstream
//! breaks them: one list, counted per stream in [`Violations`] and exported as
//! `toolpulse_upstream_violations_total{rule}`.

/// A rule of the stream that an upstream broke, and what toolpulse did about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The output of a hosted call, or the gateway's own hosted item folded into one, could
    /// not give up its index (a later index was already used): forwarded as it is.
    HostedOutputIndex,
}

impl Rule {
    pub const ALL: [Rule; 1] = [Rule::HostedOutputIndex];

    /// The `rule` label of `toolpulse_upstream_violations_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::HostedOutputIndex => "hosted_output_index",
        }
    }
}

/// How often each rule was broken in one stream.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Violations([u64; Rule::ALL.len()]);

impl Violations {
    pub fn count(&mut self, rule: Rule) {
        self.0[rule as usize] += 1;
    }

    pub fn get(&self, rule: Rule) -> u64 {
        self.0[rule as usize]
    }

    /// The rules broken, with their counts.
    pub fn broken(&self) -> impl Iterator<Item = (Rule, u64)> + '_ {
        Rule::ALL
            .into_iter()
            .map(|rule| (rule, self.get(rule)))
            .filter(|(_, n)| *n > 0)
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
        assert_eq!(broken, [("hosted_output_index", 1)]);
    }
}
