//! The upstream response body. For HTTP/1 it owns its connection and drives it from
//! `poll_frame`, so reading the upstream costs no task switch; once the body has ended, the
//! connection goes back to the pool (when the body is dropped, i.e. when the proxy is done with
//! the response). A body dropped before its end closes its connection (the client went away).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1;

use super::Conn;
use super::pool::{Idle, Pool};
use crate::proxy::request_body::RequestBody;

pub struct UpstreamBody {
    incoming: Incoming,
    /// The HTTP/1 connection this body is read from; `None` for HTTP/2 (its connection has a
    /// task of its own).
    owned: Option<Owned>,
    /// The body's end was read (a chunked body does not say so otherwise).
    ended: bool,
}

pub(super) struct Owned {
    sender: http1::SendRequest<RequestBody>,
    /// `None` once it ended.
    conn: Option<Conn>,
    pool: Arc<Pool>,
}

impl Owned {
    pub(super) fn new(
        sender: http1::SendRequest<RequestBody>,
        conn: Option<Conn>,
        pool: Arc<Pool>,
    ) -> Owned {
        Owned { sender, conn, pool }
    }

    /// Lets the connection read and write; whether it was there to drive.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(conn) = &mut self.conn else {
            return false;
        };
        if super::drive(conn, cx).is_ready() {
            self.conn = None;
        }
        true
    }
}

impl UpstreamBody {
    pub(super) fn owned(incoming: Incoming, owned: Owned) -> UpstreamBody {
        UpstreamBody {
            incoming,
            owned: Some(owned),
            ended: false,
        }
    }

    pub(super) fn shared(incoming: Incoming) -> UpstreamBody {
        UpstreamBody {
            incoming,
            owned: None,
            ended: false,
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        // The body first, so the connection sees it wants data; then the connection, which
        // reads and hands over what came; then the body again.
        let mut polled = Pin::new(&mut this.incoming).poll_frame(cx);
        if polled.is_pending() && this.owned.as_mut().is_some_and(|o| o.drive(cx)) {
            polled = Pin::new(&mut this.incoming).poll_frame(cx);
        }
        if let Poll::Ready(None) = polled {
            this.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        if !self.is_end_stream() {
            return;
        }
        if let Some(Owned {
            sender,
            conn: Some(conn),
            pool,
        }) = self.owned.take()
        {
            pool.put(Idle::new(sender, conn));
        }
    }
}
