//! The timer a streamed body arms at the core's next wake-up (a heartbeat, a paced progress
//! report), re-armed only when that time changes: one `Sleep` per stream, shared by the
//! rewritten body and the AG-UI body.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

pub struct Wake {
    sleep: Pin<Box<Sleep>>,
    at: Option<Instant>,
}

impl Default for Wake {
    fn default() -> Self {
        Wake {
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            at: None,
        }
    }
}

impl Wake {
    /// Ready once `next` (the core's next wake-up, if any) has come; pending while it has not,
    /// or when there is none.
    pub fn poll_until(
        &mut self,
        next: Option<std::time::Instant>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let Some(at) = next.map(Instant::from_std) else {
            self.at = None;
            return Poll::Pending;
        };
        if self.at != Some(at) {
            self.sleep.as_mut().reset(at);
            self.at = Some(at);
        }
        self.sleep.as_mut().poll(cx)
    }
}
