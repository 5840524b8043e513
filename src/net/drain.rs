//! A signal many tasks watch on every wake-up (a drain): raised once; while a task polls with
//! the waker it registered, it is looked at with an atomic load, and polled (a registration
//! under the token's lock) only when the waker changes. tokio-util's `CancellationToken`
//! alone takes a mutex its whole tree shares on every `is_cancelled` and every poll of its
//! future: with one token per listener, a lock per event of every stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Waker};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

#[derive(Clone, Default)]
pub struct Signal {
    token: CancellationToken,
    raised: Arc<AtomicBool>,
}

impl Signal {
    /// Raises the signal: every watch sees it, and every task waiting on one is woken.
    pub fn raise(&self) {
        // Before the wake-ups, so that a task they wake sees it with its load.
        self.raised.store(true, Ordering::Release);
        self.token.cancel();
    }

    /// A watch for one task.
    pub fn watch(&self) -> Watch {
        Watch {
            wait: Box::pin(self.token.clone().cancelled_owned()),
            raised: self.raised.clone(),
            registered: None,
        }
    }
}

pub struct Watch {
    wait: Pin<Box<WaitForCancellationFutureOwned>>,
    raised: Arc<AtomicBool>,
    /// The waker the token holds for this watch.
    registered: Option<Waker>,
}

impl Watch {
    /// Whether the signal is raised; if not, the task is woken when it is.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return self.raised.load(Ordering::Acquire);
        }
        self.registered = Some(cx.waker().clone());
        self.wait.as_mut().poll(cx).is_ready()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_watch_sees_the_signal_and_its_task_is_woken() {
        let signal = Signal::default();
        let mut watch = signal.watch();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(!watch.poll(&mut cx));
        assert!(
            !watch.poll(&mut cx),
            "the same waker: looked at, not polled"
        );
        signal.raise();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken");
        assert!(watch.poll(&mut cx));
        // A watch made after the signal sees it at once.
        assert!(signal.watch().poll(&mut Context::from_waker(Waker::noop())));
    }
}
