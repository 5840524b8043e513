//! Sending a response: each body frame queued as its framing says ([`take`]), one vectored
//! write of all that is queued, and the send timeout, as nginx's `send_timeout`: armed when a
//! write finds the socket full, disarmed by any byte the client takes, so it bounds the time
//! between two bytes taken, never the time a whole response takes. A client that stops reading
//! holds its response, its upstream exchange and the queued bytes for no longer than this.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use tokio::time::{Instant, Sleep};

use super::body::Shared;
use crate::http1::Framing;
use crate::http1::encode::{MAX_SLICES, Out};

/// Queues one body frame into `out` as the response's framing says; a `Content-Length` body's
/// excess is dropped.
pub fn take(frame: Frame<Bytes>, out: &mut Out, framing: Framing, remaining: &mut u64) {
    let Ok(mut data) = frame.into_data() else {
        // Trailers: the last chunk goes without them.
        return;
    };
    if data.is_empty() {
        return;
    }
    match framing {
        Framing::Chunked => out.push_chunk(data),
        Framing::Length(_) => {
            let owed = usize::try_from(*remaining).unwrap_or(usize::MAX);
            if data.len() > owed {
                tracing::debug!("response body longer than its Content-Length: cut");
                data.truncate(owed);
            }
            *remaining -= data.len() as u64;
            if !data.is_empty() {
                out.push(None, data, b"");
            }
        }
        Framing::Close => out.push(None, data, b""),
        Framing::Nothing => {}
    }
}

/// Writes what `out` holds with one vectored write; ready once something was written.
pub fn write(shared: &Shared, out: &mut Out, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    // A paced stream writes one piece at a time: its slices are set up in a small array, not
    // in one for every piece there can be (49 slices to fill at every event).
    if out.pieces() <= 1 {
        write_with::<{ 1 + 3 }>(shared, out, cx)
    } else {
        write_with::<MAX_SLICES>(shared, out, cx)
    }
}

/// [`write`], with room for `N` slices.
fn write_with<const N: usize>(
    shared: &Shared,
    out: &mut Out,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    loop {
        let mut slices = [IoSlice::new(&[]); N];
        let n = out.slices(&mut slices);
        // Tried first: a socket known not writable says so without a syscall, and only then
        // is the task's waker registered (a readiness check before every write costs more).
        match shared.stream.try_write_vectored(&slices[..n]) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                ready!(shared.stream.poll_write_ready(cx))?;
            }
            Err(e) => return Poll::Ready(Err(e)),
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Ok(written) => {
                out.advance(written);
                return Poll::Ready(Ok(()));
            }
        }
    }
}

pub struct SendTimer {
    limit: Duration,
    /// Kept across exchanges and reset, so a stalled write costs no allocation.
    sleep: Option<Pin<Box<Sleep>>>,
    /// A write is waiting for the client since the sleep's deadline minus `limit`.
    armed: bool,
}

impl SendTimer {
    pub fn new(limit: Duration) -> Self {
        SendTimer {
            limit,
            sleep: None,
            armed: false,
        }
    }

    /// The client took bytes.
    pub fn progress(&mut self) {
        self.armed = false;
    }

    /// A write found the socket full: whether it has been waiting for the limit (the waker
    /// is registered for when it will have).
    pub fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = Instant::now() + self.limit;
        let sleep = match &mut self.sleep {
            Some(sleep) if self.armed => sleep,
            Some(sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            None => self
                .sleep
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.armed = true;
        sleep.as_mut().poll(cx).is_ready()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn expired(timer: &mut SendTimer) -> bool {
        std::future::poll_fn(|cx| Poll::Ready(timer.expired(cx))).await
    }

    #[tokio::test(start_paused = true)]
    async fn it_fires_a_limit_after_the_last_progress() {
        let limit = Duration::from_secs(60);
        let mut timer = SendTimer::new(limit);
        assert!(!expired(&mut timer).await);
        tokio::time::advance(limit / 2).await;
        assert!(!expired(&mut timer).await);
        timer.progress();
        tokio::time::advance(limit / 2 + Duration::from_secs(1)).await;
        assert!(!expired(&mut timer).await, "re-armed by the progress");
        tokio::time::advance(limit).await;
        assert!(expired(&mut timer).await);
    }
}
