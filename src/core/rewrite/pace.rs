//! Pacing of out-of-band progress per call: at most one event per `interval`, the newest report
//! replacing an undelivered older one, and the last one always delivered before the call ends.
//!
//! Memory: one entry per open call that reported progress (the caller removes it when the call
//! ends), each holding one report.

use std::time::{Duration, Instant};

use crate::core::lifecycle::{Phase, Progress, Transition};

#[derive(Debug)]
struct Paced {
    call_id: String,
    last_sent: Option<Instant>,
    pending: Option<Progress>,
}

#[derive(Debug)]
pub struct Pacer {
    interval: Duration,
    calls: Vec<Paced>,
    /// Reports replaced by a newer one before they went out.
    pub coalesced: u64,
}

impl Pacer {
    pub fn new(interval: Duration) -> Self {
        Pacer {
            interval,
            calls: Vec::new(),
            coalesced: 0,
        }
    }

    fn entry(&mut self, call_id: &str) -> &mut Paced {
        let i = match self.calls.iter().position(|c| c.call_id == call_id) {
            Some(i) => i,
            None => {
                self.calls.push(Paced {
                    call_id: call_id.to_string(),
                    last_sent: None,
                    pending: None,
                });
                self.calls.len() - 1
            }
        };
        &mut self.calls[i]
    }

    /// A new report for `call_id`: kept as the call's pending one (replacing an older one).
    pub fn offer(&mut self, call_id: &str, report: Progress) {
        if self.entry(call_id).pending.replace(report).is_some() {
            self.coalesced += 1;
        }
    }

    /// Whether a report waits to go out (at every chunk: most often there is no call to pace).
    pub fn has_pending(&self) -> bool {
        self.calls.iter().any(|c| c.pending.is_some())
    }

    /// The pending reports whose call may send one at `now`, marked as sent.
    pub fn due(&mut self, now: Instant) -> Vec<(String, Progress)> {
        let interval = self.interval;
        let mut out = Vec::new();
        for call in &mut self.calls {
            let ready = call.last_sent.is_none_or(|t| now >= t + interval);
            if ready && let Some(report) = call.pending.take() {
                call.last_sent = Some(now);
                out.push((call.call_id.clone(), report));
            }
        }
        out
    }

    /// When the next pending report held back by the interval may go out (a report that is
    /// not held back goes out at the next `due`).
    pub fn next_due(&self) -> Option<Instant> {
        let pending = self.calls.iter().filter(|c| c.pending.is_some());
        pending
            .filter_map(|c| c.last_sent.map(|t| t + self.interval))
            .min()
    }

    /// The call ends: its pending report (to send before its end), and its entry is gone.
    pub fn finish(&mut self, call_id: &str) -> Option<Progress> {
        let i = self.calls.iter().position(|c| c.call_id == call_id)?;
        self.calls.swap_remove(i).pending
    }

    /// When `transition` ends its call: the call's pending report, as the transition to render
    /// before the end (the last report always goes out).
    pub fn last_report(&mut self, transition: &Transition) -> Option<Transition> {
        let Phase::Finished { duration, .. } = &transition.phase else {
            return None;
        };
        let report = self.finish(&transition.call.call_id)?;
        let phase = Phase::Progress {
            elapsed: *duration,
            report,
        };
        let call = transition.call.clone();
        Some(Transition { call, phase })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(n: f64) -> Progress {
        Progress {
            progress: n,
            total: Some(4.0),
            message: None,
        }
    }

    #[test]
    fn one_per_interval_newest_wins_last_one_kept() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut p = Pacer::new(Duration::from_millis(100));
        p.offer("a", report(1.0));
        assert_eq!(p.due(t0), vec![("a".into(), report(1.0))]);
        p.offer("a", report(2.0));
        p.offer("a", report(3.0));
        assert_eq!(p.coalesced, 1);
        assert!(p.due(ms(50)).is_empty(), "within the interval");
        assert_eq!(p.next_due(), Some(ms(100)));
        assert_eq!(p.due(ms(100)), vec![("a".into(), report(3.0))]);
        p.offer("a", report(4.0));
        assert_eq!(
            p.finish("a"),
            Some(report(4.0)),
            "the last one before the end"
        );
        assert_eq!(p.next_due(), None);
        assert_eq!(p.finish("a"), None);
    }
}
