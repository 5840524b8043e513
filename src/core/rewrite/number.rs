//! Dense renumbering of `sequence_number`s around injected events.
//!
//! Every upstream number is shifted by the count of numbered events injected before it, and
//! injected events take the numbers in between, so a dense upstream (0, 1, 2, …) stays dense.
//! Injected events get numbers only once the stream has shown one. A number that does not grow
//! (another response starting at 0 on the same connection) starts a new run with no shift.
//! An upstream event that is dropped (profile `hosted`) gives up its number: later ones move
//! down, so the shift goes down as well as up.
//!
//! Numbers are `u64`s: an injected event takes a number only if it is above the last one out
//! and leaves one for the upstream event it goes before. Past `u64::MAX` (an upstream that
//! numbers its events up there) no number is left: [`Numbering::inject`] says
//! [`Exhausted`], and the event is not injected (numbering it `u64::MAX` again, as a saturating
//! add would, gives clients repeated numbers).

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
    /// Injections refused for want of a number ([`Exhausted`]).
    pub exhausted: u64,
}

/// No number is left for an injected event: the next one would be past `u64::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted;

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

    /// The number for an injected event, `None` while the stream has shown no number;
    /// [`Exhausted`] when there is none left under `u64::MAX` (the event must not go out).
    pub fn inject(&mut self) -> Result<Option<u64>, Exhausted> {
        let n = match self.pending {
            // The upstream event it goes before takes the number after it.
            Some(p) => shifted(p, self.shift).filter(|&n| n < u64::MAX),
            None => match self.last_out {
                Some(last) => last.checked_add(1),
                None => return Ok(None),
            },
        };
        let Some(n) = n else {
            self.exhausted += 1;
            return Err(Exhausted);
        };
        self.shift += 1;
        self.last_out = Some(n);
        Ok(Some(n))
    }

    /// The number the event announced by `begin` goes out with.
    pub fn forward(&mut self) -> Option<u64> {
        let n = self.pending.take()?;
        // Past `u64::MAX` only when events were injected before upstream numbers came near
        // it: the top number, never one below the last.
        let out = shifted(n, self.shift).unwrap_or(u64::MAX);
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

/// `n` moved by `shift`; `None` past `u64::MAX` (below 0 it stays 0: a dropped event's
/// number is always below the later ones').
fn shifted(n: u64, shift: i64) -> Option<u64> {
    if shift >= 0 {
        n.checked_add(shift.unsigned_abs())
    } else {
        Some(n.saturating_sub(shift.unsigned_abs()))
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
        assert_eq!(n.inject(), Ok(Some(2)), "after event 1");
        assert_eq!(n.inject(), Ok(Some(3)));
        n.begin(Some(2));
        assert_eq!(n.inject(), Ok(Some(4)), "before upstream 2");
        assert_eq!(n.forward(), Some(5));
        n.begin(None);
        assert_eq!(n.forward(), None);
        assert_eq!(n.inject(), Ok(Some(6)));
        n.begin(Some(3));
        assert_eq!(n.forward(), Some(7));
    }

    #[test]
    fn unnumbered_stream_gets_no_numbers() {
        let mut n = Numbering::default();
        n.begin(None);
        assert_eq!(n.inject(), Ok(None));
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
        assert_eq!(
            n.inject(),
            Ok(Some(1)),
            "an injection takes the dropped number"
        );
        assert_eq!(n.forward(), Some(2));
        n.begin(Some(3));
        n.drop_pending();
        n.begin(Some(4));
        n.drop_pending();
        n.begin(Some(5));
        assert_eq!(n.forward(), Some(3), "two dropped: down by two");
        n.begin(None);
        assert_eq!(n.inject(), Ok(Some(4)));
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
                    0 => out.extend(n.inject().expect("numbers left")),
                    1 => { n.begin(Some(upstream)); upstream += 1; n.drop_pending(); }
                    _ => { n.begin(Some(upstream)); upstream += 1; out.extend(n.forward()); }
                }
            }
            let dense: Vec<u64> = (0..out.len() as u64).collect();
            proptest::prop_assert_eq!(out, dense);
        }
    }

    /// An upstream at `u64::MAX`: injections after it or before it have no number left and
    /// are refused (once numbered `u64::MAX` each, repeating the upstream's); a new run below
    /// it has numbers again.
    #[test]
    fn no_injection_past_the_largest_number() {
        let mut n = Numbering::default();
        n.begin(Some(u64::MAX - 2));
        assert_eq!(n.forward(), Some(u64::MAX - 2));
        n.begin(None);
        assert_eq!(n.inject(), Ok(Some(u64::MAX - 1)), "still room");
        n.begin(Some(u64::MAX - 1));
        assert_eq!(
            n.inject(),
            Err(Exhausted),
            "upstream MAX-1 needs MAX after it"
        );
        assert_eq!(n.forward(), Some(u64::MAX));
        n.begin(None);
        assert_eq!(n.inject(), Err(Exhausted));
        assert_eq!(n.inject(), Err(Exhausted));
        n.begin(Some(u64::MAX));
        assert_eq!(n.inject(), Err(Exhausted));
        assert_eq!(n.forward(), Some(u64::MAX), "never below the last");
        assert_eq!(n.exhausted, 4);
        n.begin(Some(0));
        assert_eq!(n.forward(), Some(0));
        assert_eq!(n.inject(), Ok(Some(1)), "a new run has numbers");
    }

    #[test]
    fn a_new_run_resets_the_shift() {
        let mut n = Numbering::default();
        n.begin(Some(0));
        n.forward();
        n.inject().expect("numbers left");
        n.begin(Some(0));
        assert_eq!(n.forward(), Some(0));
        assert!(!n.is_shifting());
    }
}
