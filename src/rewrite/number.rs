//! Dense renumbering of `sequence_number`s around injected events.
//!
//! Every upstream number is shifted by the count of numbered events injected before it, and
//! injected events take the numbers in between, so a dense upstream (0, 1, 2, …) stays dense.
//! Injected events get numbers only once the stream has shown one. A number that does not grow
//! (another response starting at 0 on the same connection) starts a new run with no shift.
//! An upstream event that is dropped (profile `hosted`) gives up its number: later ones move
//! down, so the shift goes down as well as up.

#[derive(Debug, Default, Clone)]
pub struct Numbering {
    /// Injected minus dropped events so far in this run.
    shift: i64,
    /// The upstream number of the event about to be forwarded, between `begin` and `forward`.
    pending: Option<u64>,
    last_in: Option<u64>,
    last_out: Option<u64>,
    /// Numbers that did not grow, each starting a new run (rule `sequence_restart`).
    pub restarts: u64,
}

impl Numbering {
    /// Whether upstream numbers are currently being changed (so every event must be read).
    pub fn is_shifting(&self) -> bool {
        self.shift != 0
    }

    /// An upstream event numbered `upstream` (or not) is next; events injected before it take
    /// its place.
    pub fn begin(&mut self, upstream: Option<u64>) {
        if let (Some(n), Some(prev)) = (upstream, self.last_in)
            && n <= prev
        {
            self.shift = 0;
            self.restarts += 1;
        }
        self.pending = upstream;
    }

    /// The number for an injected event, `None` while the stream has shown no number.
    pub fn inject(&mut self) -> Option<u64> {
        let n = match self.pending {
            Some(p) => shifted(p, self.shift),
            None => self.last_out?.saturating_add(1),
        };
        self.shift += 1;
        self.last_out = Some(n);
        Some(n)
    }

    /// The number the event announced by `begin` goes out with.
    pub fn forward(&mut self) -> Option<u64> {
        let n = self.pending.take()?;
        let out = shifted(n, self.shift);
        self.last_in = Some(n);
        self.last_out = Some(out);
        Some(out)
    }

    /// The event announced by `begin` is dropped: it gives up its number, and later events move
    /// down into it.
    pub fn drop_pending(&mut self) {
        if let Some(n) = self.pending.take() {
            self.last_in = Some(n);
            self.shift -= 1;
        }
    }
}

/// `n` moved by `shift`, within `u64`.
fn shifted(n: u64, shift: i64) -> u64 {
    if shift >= 0 {
        n.saturating_add(shift.unsigned_abs())
    } else {
        n.saturating_sub(shift.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injections_before_and_after_keep_density() {
        let mut n = Numbering::default();
        n.begin(Some(0));
        assert_eq!(n.forward(), Some(0));
        n.begin(Some(1));
        assert_eq!(n.forward(), Some(1));
        assert_eq!(n.inject(), Some(2), "after event 1");
        assert_eq!(n.inject(), Some(3));
        n.begin(Some(2));
        assert_eq!(n.inject(), Some(4), "before upstream 2");
        assert_eq!(n.forward(), Some(5));
        n.begin(None);
        assert_eq!(n.forward(), None);
        assert_eq!(n.inject(), Some(6));
        n.begin(Some(3));
        assert_eq!(n.forward(), Some(7));
    }

    #[test]
    fn unnumbered_stream_gets_no_numbers() {
        let mut n = Numbering::default();
        n.begin(None);
        assert_eq!(n.inject(), None);
        assert!(!n.is_shifting());
        assert_eq!(n.forward(), None);
    }

    #[test]
    fn dropped_events_give_up_their_numbers() {
        let mut n = Numbering::default();
        n.begin(Some(0));
        assert_eq!(n.forward(), Some(0));
        n.begin(Some(1));
        n.drop_pending();
        assert!(n.is_shifting());
        n.begin(Some(2));
        assert_eq!(n.inject(), Some(1), "an injection takes the dropped number");
        assert_eq!(n.forward(), Some(2));
        n.begin(Some(3));
        n.drop_pending();
        n.begin(Some(4));
        n.drop_pending();
        n.begin(Some(5));
        assert_eq!(n.forward(), Some(3), "two dropped: down by two");
        n.begin(None);
        assert_eq!(n.inject(), Some(4));
        n.begin(Some(6));
        assert_eq!(n.forward(), Some(5));
    }

    proptest::proptest! {
        /// Whatever is forwarded, dropped or injected, the output numbers of a dense upstream
        /// are dense.
        #[test]
        fn dense_whatever_is_dropped_or_injected(steps in proptest::collection::vec(0u8..4, 0..60)) {
            let mut n = Numbering::default();
            let mut out = Vec::new();
            let mut upstream = 0;
            for step in steps {
                match step {
                    0 => out.extend(n.inject()),
                    1 => { n.begin(Some(upstream)); upstream += 1; n.drop_pending(); }
                    _ => { n.begin(Some(upstream)); upstream += 1; out.extend(n.forward()); }
                }
            }
            let dense: Vec<u64> = (0..out.len() as u64).collect();
            proptest::prop_assert_eq!(out, dense);
        }
    }

    #[test]
    fn a_new_run_resets_the_shift() {
        let mut n = Numbering::default();
        n.begin(Some(0));
        n.forward();
        n.inject();
        n.begin(Some(0));
        assert_eq!(n.forward(), Some(0));
        assert!(!n.is_shifting());
    }
}
