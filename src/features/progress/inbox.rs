//! A stream's inbox of progress reports: the hub puts reports in from any task, the stream's
//! body takes them out when it is polled. One report per call: a newer one replaces an older
//! one not yet taken, so a chatty tool can neither grow memory nor block the sender.

use std::sync::Mutex;
use std::task::Waker;

use super::Progress;

/// Calls with an untaken report per inbox (a stream tracks at most `max_open_calls` calls).
pub const MAX_INBOX_CALLS: usize = 1024;

#[derive(Debug, Default)]
pub struct Inbox {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    reports: Vec<(String, Progress)>,
    waker: Option<Waker>,
}

/// What became of a report put in an inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Queued,
    /// It replaced an older report of the same call.
    Replaced,
    /// The inbox holds reports for too many calls already.
    Full,
}

impl Inbox {
    pub fn put(&self, call_id: &str, report: Progress) -> Put {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let put = match state.reports.iter().position(|(id, _)| id == call_id) {
            Some(i) => {
                state.reports[i].1 = report;
                Put::Replaced
            }
            None if state.reports.len() >= MAX_INBOX_CALLS => return Put::Full,
            None => {
                state.reports.push((call_id.to_string(), report));
                Put::Queued
            }
        };
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
        put
    }

    /// Takes every report; when there is none, `waker` is woken by the next `put`.
    pub fn take(&self, waker: &Waker) -> Vec<(String, Progress)> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.reports.is_empty() && !state.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            state.waker = Some(waker.clone());
        }
        std::mem::take(&mut state.reports)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn report(n: f64) -> Progress {
        Progress {
            progress: n,
            total: None,
            message: None,
        }
    }

    #[test]
    fn newest_report_per_call_and_a_wake_up() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let inbox = Inbox::default();
        assert!(inbox.take(&waker).is_empty());
        assert_eq!(inbox.put("a", report(1.0)), Put::Queued);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken");
        assert_eq!(inbox.put("a", report(2.0)), Put::Replaced);
        inbox.put("b", report(1.0));
        let taken = inbox.take(&waker);
        assert_eq!(
            taken,
            vec![("a".into(), report(2.0)), ("b".into(), report(1.0))]
        );
        for i in 0..MAX_INBOX_CALLS {
            inbox.put(&i.to_string(), report(0.0));
        }
        assert_eq!(inbox.put("x", report(0.0)), Put::Full);
    }
}
