//! A lingering close, as nginx's `lingering_close`: a connection toolpulse closes while its
//! client may still be sending (a request answered before its body was read, a head refused)
//! first shuts down its sending side, so the client reads the answer and then the end, and
//! then reads and drops what the client still sends until the client closes too.
//!
//! Closed at once instead, the kernel answers unread bytes with a reset, and a reset can
//! destroy the answer before the client read it: the client reports "connection reset" in
//! place of the 401 or 503 it was sent.
//!
//! Bounded as nginx bounds it: [`LINGER_TIMEOUT`] for each next read, [`LINGER_TIME`] in all,
//! and nothing kept (a small stack buffer is read into and dropped).

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// How long to wait for the client's next bytes (nginx's `lingering_timeout`).
pub const LINGER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to linger in all (nginx's `lingering_time`).
pub const LINGER_TIME: Duration = Duration::from_secs(30);
/// What one read drops.
const DISCARD_BYTES: usize = 4096;

/// A connection's sending side shut down, its receiving side read until the client closes.
pub struct Linger {
    until: Instant,
    timer: Pin<Box<Sleep>>,
}

impl Linger {
    /// Shuts down the sending side of `stream` (what was written goes out first); `None` when
    /// that fails (the connection is gone already: nothing to linger for).
    pub fn start(stream: &TcpStream) -> Option<Linger> {
        if let Err(error) = socket2::SockRef::from(stream).shutdown(Shutdown::Write) {
            tracing::debug!(%error, "no lingering close: shutdown failed");
            return None;
        }
        let now = Instant::now();
        Some(Linger {
            until: now + LINGER_TIME,
            timer: Box::pin(tokio::time::sleep_until(now + LINGER_TIMEOUT)),
        })
    }

    /// Ready once the client closed, failed or went quiet, or the time is up.
    pub fn poll(&mut self, stream: &TcpStream, cx: &mut Context<'_>) -> Poll<()> {
        let mut discard = [0u8; DISCARD_BYTES];
        loop {
            if self.timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            if ready!(stream.poll_read_ready(cx)).is_err() {
                return Poll::Ready(());
            }
            let mut read = false;
            loop {
                match stream.try_read(&mut discard) {
                    Ok(0) => return Poll::Ready(()),
                    Ok(_) => read = true,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => return Poll::Ready(()),
                }
            }
            if read {
                let next = (Instant::now() + LINGER_TIMEOUT).min(self.until);
                self.timer.as_mut().reset(next);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A connected pair: toolpulse's side and the client's.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        (accepted.expect("accept").0, client.expect("connect"))
    }

    async fn linger(ours: &TcpStream) -> Duration {
        let start = Instant::now();
        let mut linger = Linger::start(ours).expect("started");
        std::future::poll_fn(|cx| linger.poll(ours, cx)).await;
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn the_client_reads_the_end_and_its_close_ends_the_linger() {
        let (ours, mut client) = pair().await;
        client.write_all(b"more of a body").await.expect("write");
        let client = tokio::spawn(async move {
            let mut rest = Vec::new();
            client
                .read_to_end(&mut rest)
                .await
                .expect("an end, not a reset");
            // The end read: the client closes.
        });
        let took = linger(&ours).await;
        client.await.expect("client");
        assert!(took < LINGER_TIMEOUT, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_client_is_left_after_the_linger_timeout() {
        let (ours, mut client) = pair().await;
        client.write_all(b"some").await.expect("write");
        let took = linger(&ours).await;
        assert!(took >= LINGER_TIMEOUT && took < LINGER_TIME, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_keeps_sending_is_left_after_the_linger_time() {
        let (ours, mut client) = pair().await;
        let sender = tokio::spawn(async move {
            loop {
                if client.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(LINGER_TIMEOUT / 2).await;
            }
        });
        let took = linger(&ours).await;
        sender.abort();
        assert!(took >= LINGER_TIME, "{took:?}");
        assert!(took < LINGER_TIME + LINGER_TIMEOUT, "{took:?}");
    }
}
