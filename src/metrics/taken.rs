//! The counters every request counts in, taken from their families once per label value and
//! kept: a family hashes the label set and looks it up under its lock at each use, which was
//! most of what counting a request cost. A counter is still taken at its first use, so a
//! series shows in `/metrics` once it has counted, as before.

use std::hash::Hash;
use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// One kept counter per value of a label that takes `N` values.
pub struct Taken<const N: usize>([OnceLock<Counter>; N]);

impl<const N: usize> Default for Taken<N> {
    fn default() -> Self {
        Taken(std::array::from_fn(|_| OnceLock::new()))
    }
}

impl<const N: usize> Taken<N> {
    /// The counter of the `at`th value, taken from `family` (for `labels`) the first time.
    pub fn get<S: Clone + Hash + Eq>(
        &self,
        family: &Family<S, Counter>,
        at: usize,
        labels: impl FnOnce() -> S,
    ) -> &Counter {
        self.0[at].get_or_init(|| family.get_or_create(&labels()).clone())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    /// A kept counter is the family's own: both show one count, and a series appears only
    /// once it has counted.
    #[test]
    fn a_kept_counter_counts_in_its_family() {
        let family = Family::<Vec<(String, String)>, Counter>::default();
        let mut registry = Registry::default();
        registry.register("requests", "Requests", family.clone());
        let text = || {
            let mut text = String::new();
            encode(&mut text, &registry).expect("encoded");
            text
        };
        let labels = |value: &str| vec![("response".to_string(), value.to_string())];
        let taken = Taken::<2>::default();
        assert!(!text().contains("rewritten"), "{}", text());
        taken.get(&family, 0, || labels("rewritten")).inc();
        taken.get(&family, 0, || labels("rewritten")).inc();
        assert_eq!(family.get_or_create(&labels("rewritten")).get(), 2);
        assert!(
            text().contains("requests_total{response=\"rewritten\"} 2"),
            "{}",
            text()
        );
        assert!(!text().contains("passthrough"), "{}", text());
    }
}
