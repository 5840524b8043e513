//! One HTTP/1.1 connection to the upstream, read and written by toolpulse itself with the codec
//! both roles share (`http1`, as a client): the request head written with one write (with the
//! body, when it is in memory), the response head parsed from the read buffer, the body decoded
//! from the reads as they come (`read`) — no task, no channel, no second buffer. Shaped after
//! pingora's HTTP/1 client (`protocols/http/v1/client.rs`) and hyper's `proto/h1`.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::io::Io;
use super::read::{BodyRead, Reads};
use super::request::{Upload, UploadError, write_some};
use crate::http1::client::{self, HeadError, Parsed};
use crate::http1::decode::{DecodeError, Decoder, Step};
use crate::http1::encode::Out;
use crate::http1::head::{MAX_HEAD_BYTES, has_blank_line};
use crate::http1::{Framing, Known};
use crate::net::upstream::outgoing::Outgoing;
use crate::net::upstream::pool::{Idle, Pool, Reusable};

/// A request body in memory up to this size goes out in the head's write.
const COALESCE_MAX: usize = 64 * 1024;

/// What went wrong on an exchange.
#[derive(Debug, thiserror::Error)]
pub enum H1Error {
    #[error("{0}")]
    Head(#[from] HeadError),
    #[error("the upstream's response body: {0}")]
    Body(#[from] DecodeError),
    #[error("{0}")]
    Upload(#[from] UploadError),
    #[error("the upstream connection failed: {0}")]
    Io(#[from] io::Error),
    #[error("the upstream closed the connection before its response head")]
    ClosedBeforeHead,
}

/// A connection to the upstream: its stream, and what was read of it and not yet taken.
pub struct Connection {
    io: Io,
    /// What was read and not yet taken.
    reads: Reads,
}

impl Connection {
    pub fn new(io: Io) -> Box<Connection> {
        Box::new(Connection {
            io,
            reads: Reads::default(),
        })
    }

    /// Writes all of `out`, vectored.
    async fn write_all(&mut self, out: &mut Out) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            while !out.is_empty() {
                ready!(write_some(&mut self.io, out, cx))?;
            }
            Pin::new(&mut self.io).poll_flush(cx)
        })
        .await
    }
}

impl Reusable for Connection {
    /// Whether the connection can take a request: nothing to read and no end of file, without
    /// waiting (the upstream closed, reset or sent something unasked while it was idle).
    fn is_open(&mut self) -> bool {
        if !self.reads.buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut probe = [0u8; 1];
        let mut probe = ReadBuf::new(&mut probe);
        Pin::new(&mut self.io)
            .poll_read(&mut cx, &mut probe)
            .is_pending()
    }
}

/// A request that got no response head; `request` is back when nothing of it was written.
pub struct NotSent {
    pub error: H1Error,
    pub request: Option<Request<Outgoing>>,
}

/// Sends `request` on `conn` and reads the response head; the connection then goes with the
/// response body, which hands it back to `pool` when it ends cleanly.
pub async fn send(
    mut conn: Box<Connection>,
    request: Request<Outgoing>,
    pool: &Arc<Pool<Connection>>,
) -> Result<Response<H1Body>, NotSent> {
    let (mut parts, body) = request.into_parts();
    let known = Known {
        empty: body.is_end_stream(),
        length: body.size_hint().exact(),
    };
    let framing = client::frame(&mut parts, known);
    let mut out = Out::new(client::encode(&parts).freeze());
    let in_memory = match framing {
        Framing::Length(0) => Some(Bytes::new()),
        Framing::Length(n) if n <= COALESCE_MAX as u64 => body.in_memory(),
        _ => None,
    };
    if let Some(data) = &in_memory
        && !data.is_empty()
    {
        out.push(None, data.clone(), b"");
    }
    if let Err(error) = conn.write_all(&mut out).await {
        // Nothing of the body was taken: the request can go on another connection.
        return Err(NotSent {
            error: error.into(),
            request: Some(Request::from_parts(parts, body)),
        });
    }
    let mut upload = match in_memory {
        Some(_) => {
            // Written: the bytes the body holds of the budget are given back now.
            drop(body);
            None
        }
        None => Some(Box::new(Upload::new(body, framing))),
    };
    let exchange = Exchange {
        conn: &mut conn,
        method: &parts.method,
        upload: &mut upload,
        upload_failed: None,
        searched: 0,
    };
    let (parsed, reusable) = match exchange.await {
        Ok(done) => done,
        Err(error) => {
            return Err(NotSent {
                error,
                request: None,
            });
        }
    };
    let decoder = Decoder::new(parsed.framing);
    let body = H1Body {
        conn: Some(conn),
        decoder,
        upload,
        reusable: reusable && parsed.keep_alive,
        ended: false,
        pool: pool.clone(),
    };
    let mut response = Response::new(body);
    *response.status_mut() = parsed.status;
    *response.version_mut() = parsed.version;
    *response.headers_mut() = parsed.headers;
    Ok(response)
}

/// Writes the rest of the request body while waiting for the response head (which may come
/// first: an upstream may answer before it read the whole body).
struct Exchange<'a> {
    conn: &'a mut Connection,
    method: &'a http::Method,
    upload: &'a mut Option<Box<Upload>>,
    upload_failed: Option<UploadError>,
    /// How much of the read buffer is known to hold no blank line.
    searched: usize,
}

impl std::future::Future for Exchange<'_> {
    /// The final head, and whether the connection may be reused after its body.
    type Output = Result<(client::Head, bool), H1Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(upload) = this.upload.as_mut()
            && let Poll::Ready(done) = upload.poll(&mut this.conn.io, cx)
        {
            *this.upload = None;
            match done {
                Ok(()) => {}
                // The upstream stopped reading: it may have answered already.
                Err(error @ UploadError::Write(_)) => {
                    tracing::debug!(%error, "request body not sent whole");
                    this.upload_failed = Some(error);
                }
                // The body itself failed (the client's, or a refusal): the upstream would wait
                // for the rest forever.
                Err(error) => return Poll::Ready(Err(error.into())),
            }
        }
        loop {
            // Parsed only once its blank line is in (a head dripped a byte at a time would be
            // parsed from its start at every byte).
            let buf = &this.conn.reads.buf;
            let complete = has_blank_line(buf, this.searched) || buf.len() >= MAX_HEAD_BYTES;
            this.searched = buf.len();
            let parsed = match complete {
                true => client::parse(buf, this.method),
                false => Ok(Parsed::Partial),
            };
            match parsed {
                Ok(Parsed::Partial) => {}
                Ok(Parsed::Informational { len }) => {
                    this.conn.reads.buf.advance(len);
                    this.searched = 0;
                    continue;
                }
                Ok(Parsed::Final { head, len }) => {
                    this.conn.reads.buf.advance(len);
                    let reusable = this.upload_failed.is_none();
                    return Poll::Ready(Ok((head, reusable)));
                }
                Err(error) => return Poll::Ready(Err(error.into())),
            }
            let read = ready!(this.conn.reads.poll_fill(Pin::new(&mut this.conn.io), cx));
            match read {
                Ok(0) | Err(_) if this.upload_failed.is_some() => {
                    let error = this.upload_failed.take().map(H1Error::from);
                    return Poll::Ready(Err(error.unwrap_or(H1Error::ClosedBeforeHead)));
                }
                Ok(0) => return Poll::Ready(Err(H1Error::ClosedBeforeHead)),
                Ok(_) => {}
                Err(error) => return Poll::Ready(Err(error.into())),
            }
        }
    }
}

/// The body of a response read from an HTTP/1 connection this body owns.
pub struct H1Body {
    /// `None` once handed back or closed.
    conn: Option<Box<Connection>>,
    decoder: Decoder,
    /// The request body still being written, if the upstream answered before it was whole
    /// (boxed: rarely there, and large).
    upload: Option<Box<Upload>>,
    /// Whether the connection can serve another request after this body.
    reusable: bool,
    ended: bool,
    pool: Arc<Pool<Connection>>,
}

impl H1Body {
    fn poll_upload(&mut self, conn: &mut Connection, cx: &mut Context<'_>) {
        if let Some(upload) = &mut self.upload
            && let Poll::Ready(done) = upload.poll(&mut conn.io, cx)
        {
            self.upload = None;
            if let Err(error) = done {
                tracing::debug!(%error, "request body not sent whole after the response head");
                self.reusable = false;
            }
        }
    }
}

impl Body for H1Body {
    type Data = Bytes;
    type Error = H1Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, H1Error>>> {
        let this = self.get_mut();
        let Some(mut conn) = this.conn.take() else {
            return Poll::Ready(None);
        };
        let polled = this.poll_body(&mut conn, cx);
        this.conn = Some(conn);
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

impl H1Body {
    fn poll_body(
        &mut self,
        conn: &mut Connection,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, H1Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        self.poll_upload(conn, cx);
        loop {
            // Nothing to decode: a paced stream's buffer between two reads. (A decoding error
            // leaves its bytes in the buffer, so it is not skipped.)
            let step = match conn.reads.buf.is_empty() {
                true => Step::default(),
                false => match self.decoder.decode(&conn.reads.buf) {
                    Ok(step) => step,
                    Err(error) => return self.fail(error.into()),
                },
            };
            if let Some(data) = step.data {
                conn.reads.buf.advance(data.start);
                let bytes = conn.reads.buf.split_to(data.len()).freeze();
                conn.reads.buf.advance(step.consumed - data.end);
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            conn.reads.buf.advance(step.consumed);
            if self.decoder.is_done() {
                self.ended = true;
                return Poll::Ready(None);
            }
            if step.consumed > 0 {
                continue;
            }
            match ready!(
                conn.reads
                    .poll_body_read(Pin::new(&mut conn.io), &mut self.decoder, cx)
            ) {
                Ok(BodyRead::Data(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Ok(BodyRead::Closed) => {
                    self.reusable = false;
                    if let Err(error) = self.decoder.eof() {
                        return self.fail(error.into());
                    }
                    self.ended = true;
                    return Poll::Ready(None);
                }
                Ok(BodyRead::Buffered) => {}
                Err(error) => return self.fail(error.into()),
            }
        }
    }

    fn fail(&mut self, error: H1Error) -> Poll<Option<Result<Frame<Bytes>, H1Error>>> {
        self.reusable = false;
        self.ended = true;
        Poll::Ready(Some(Err(error)))
    }
}

impl Drop for H1Body {
    fn drop(&mut self) {
        // A body left before its end (the client went away), or one whose request was not
        // written whole, closes its connection.
        if !(self.ended && self.reusable && self.upload.is_none()) {
            return;
        }
        if let Some(mut conn) = self.conn.take() {
            // An idle connection keeps no read buffer either (bytes left over make `is_open`
            // refuse it, so those stay).
            if conn.reads.buf.is_empty() {
                conn.reads.buf = BytesMut::new();
            }
            self.pool.put(Idle::new(conn));
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// The pool's check: a connection whose upstream sent its FIN is not taken again. Waits for
    /// the FIN to reach the socket (an event), never for a clock.
    #[tokio::test]
    async fn a_connection_the_upstream_closed_is_not_open() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (mut upstream, _) = accepted.expect("accept");
        let mut conn = Connection::new(Io::Plain(client.expect("connect")));
        assert!(conn.is_open(), "open while the upstream is silent");
        upstream.shutdown().await.expect("FIN");
        let Io::Plain(tcp) = &conn.io else {
            unreachable!("a plain connection")
        };
        tcp.readable().await.expect("the FIN arrives");
        assert!(!conn.is_open(), "closed once its FIN is in");
    }
}
