//! Watching for the client's close while its response is under way, without a look at the
//! socket at every poll. A paced stream's task is polled at each event, and a `peek` at the
//! client's socket each time costs more instructions than the rest of forwarding the event
//! takes in the glue. The socket's read readiness is registered with a waker of this
//! module's own, which notes that it fired before it wakes the task: until it has, nothing
//! the client did can have changed what a peek would find, so none is made.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tokio::io::ReadBuf;
use tokio::net::TcpStream;

/// The waker registered for the client socket's read readiness: it notes the wake-up, then
/// passes it on to the connection's task.
#[derive(Default)]
struct Noted {
    /// The socket may have become readable (or closed) since the last peek.
    readable: AtomicBool,
    /// The connection's task, as of its last poll.
    task: Mutex<Option<Waker>>,
}

impl Wake for Noted {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.readable.store(true, Ordering::Release);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            task.wake();
        }
    }
}

/// One connection's watch (made at its first use, kept across its exchanges).
pub struct CloseWatch {
    noted: Arc<Noted>,
    waker: Waker,
}

impl Default for CloseWatch {
    fn default() -> Self {
        let noted = Arc::new(Noted::default());
        let waker = Waker::from(noted.clone());
        CloseWatch { noted, waker }
    }
}

impl CloseWatch {
    /// Peeks at `stream` as `TcpStream::poll_peek` does, waking `cx`'s task when it may have
    /// something to say, but only when it may: while `armed` (set by a pending peek, cleared
    /// by a ready one; false for an exchange's first look) and no read readiness has come
    /// since, it is pending at once. Nothing else may poll `stream`'s read side while armed
    /// (it would take the registration over).
    pub fn poll_peek(
        &self,
        stream: &TcpStream,
        armed: &mut bool,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        {
            let mut task = self.noted.task.lock().unwrap_or_else(|e| e.into_inner());
            if !task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        if *armed && !self.noted.readable.load(Ordering::Acquire) {
            return Poll::Pending;
        }
        // Cleared before the look: a readiness that comes after it wakes the task again.
        self.noted.readable.store(false, Ordering::Release);
        let mut probe = [0u8; 1];
        let mut probe = ReadBuf::new(&mut probe);
        let polled = stream.poll_peek(&mut Context::from_waker(&self.waker), &mut probe);
        *armed = polled.is_pending();
        polled
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    /// Pending while the client is silent, without a second look; its bytes, then its close,
    /// wake the task and are seen. Waits for events (the wake-ups), never for a clock.
    #[tokio::test]
    async fn it_sees_what_the_client_sends_and_its_close() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (mut client, (server, _)) = (client.expect("connect"), accepted.expect("accept"));
        let watch = CloseWatch::default();
        let mut armed = false;

        // A look now, from a task nobody wakes.
        let look = |armed: &mut bool| {
            let mut cx = Context::from_waker(Waker::noop());
            match watch.poll_peek(&server, armed, &mut cx) {
                Poll::Pending => None,
                Poll::Ready(read) => Some(read.expect("peek")),
            }
        };
        assert_eq!(look(&mut armed), None, "nothing sent yet");
        assert!(armed);
        assert!(!watch.noted.readable.load(Ordering::Acquire));
        assert_eq!(look(&mut armed), None, "pending at once");

        client.write_all(b"x").await.expect("write");
        // The readiness arrives as a wake-up of the task that last looked.
        let sent = std::future::poll_fn(|cx| watch.poll_peek(&server, &mut armed, cx)).await;
        assert_eq!(sent.expect("peek"), 1);
        assert!(!armed, "a ready peek disarms");

        let mut byte = [0u8; 1];
        server.try_read(&mut byte).expect("the byte");
        assert_eq!(look(&mut armed), None, "read: nothing more");
        drop(client);
        let closed = std::future::poll_fn(|cx| watch.poll_peek(&server, &mut armed, cx)).await;
        assert_eq!(closed.expect("peek"), 0, "the close is seen");
    }
}
