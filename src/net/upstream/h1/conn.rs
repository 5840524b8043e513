//! One HTTP/1.1 connection to the upstream, read and written by toolpulse itself with the codec
//! both roles share (`http1`, as a client): the request head written with one write (with the
//! body, when it is in memory), the response head parsed from the read buffer, the body decoded
//! from the same buffer and handed on as slices of it — no task, no channel, no second buffer.
//! Shaped after pingora's HTTP/1 client (`protocols/http/v1/client.rs`) and hyper's
//! `proto/h1`.
//!
//! Reads go into the thread's scratch buffer (64 KiB, `http1::buffer::READ_BUF_MAX`, the most
//! one read takes) and are copied out at their size: a stream holds no read buffer of its own
//! (a flood's large reads go straight into the connection's buffer).

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::io::Io;
use super::request::{Upload, UploadError, write_some};
use crate::http1::buffer::READ_BUF_MAX;
use crate::http1::client::{self, HeadError, Parsed};
use crate::http1::decode::{DecodeError, Decoder};
use crate::http1::encode::Out;
use crate::http1::head::{MAX_HEAD_BYTES, has_blank_line};
use crate::http1::{Framing, Known};
use crate::net::upstream::outgoing::Outgoing;
use crate::net::upstream::pool::{Idle, Pool, Reusable};

/// Reads up to this size are copied out of the scratch buffer; a larger one sends the next
/// read straight into the connection's buffer.
const COPY_MAX: usize = 4 * 1024;
/// A request body in memory up to this size goes out in the head's write.
const COALESCE_MAX: usize = 64 * 1024;

thread_local! {
    /// Where upstream connections on this thread read into (the largest read), before what was
    /// read is copied out.
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUF_MAX].into_boxed_slice());
}

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
    buf: BytesMut,
    /// The last read was larger than [`COPY_MAX`]: the next one goes straight into `buf`.
    flooding: bool,
}

impl Connection {
    pub fn new(io: Io) -> Box<Connection> {
        Box::new(Connection {
            io,
            buf: BytesMut::new(),
            flooding: false,
        })
    }

    /// Reads once into the buffer; the number of bytes read (0 at end of file).
    ///
    /// A read goes into the thread's scratch buffer and what it got is copied into `buf`, which
    /// holds exactly the bytes not yet taken: an open stream waiting for its next event holds
    /// no read buffer (a buffer per stream would be 2 KiB of every one when 10,000 are open),
    /// an event on its way to the client holds its own size, and a paced event costs two small
    /// allocations instead of a 2 KiB one (glibc serves 2 KiB from its slow path). After a read
    /// of more than [`COPY_MAX`] (a flood), reads go straight into `buf` instead, uncopied,
    /// until one is small again.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.buf.is_empty() {
            // Let go of the share of the last buffer the event handed on still holds.
            self.buf = BytesMut::new();
        }
        let io = Pin::new(&mut self.io);
        let n = if self.flooding {
            if self.buf.capacity() - self.buf.len() < READ_BUF_MAX {
                self.buf.reserve(READ_BUF_MAX);
            }
            ready!(tokio_util::io::poll_read_buf(io, cx, &mut self.buf))?
        } else {
            ready!(SCRATCH.with_borrow_mut(|scratch| {
                let mut read = ReadBuf::new(scratch);
                ready!(io.poll_read(cx, &mut read))?;
                self.buf.extend_from_slice(read.filled());
                Poll::Ready(Ok::<_, io::Error>(read.filled().len()))
            }))?
        };
        self.flooding = n > COPY_MAX;
        Poll::Ready(Ok(n))
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
        if !self.buf.is_empty() {
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
            let buf = &this.conn.buf;
            let complete = has_blank_line(buf, this.searched) || buf.len() >= MAX_HEAD_BYTES;
            this.searched = buf.len();
            let parsed = match complete {
                true => client::parse(buf, this.method),
                false => Ok(Parsed::Partial),
            };
            match parsed {
                Ok(Parsed::Partial) => {}
                Ok(Parsed::Informational { len }) => {
                    this.conn.buf.advance(len);
                    this.searched = 0;
                    continue;
                }
                Ok(Parsed::Final { head, len }) => {
                    this.conn.buf.advance(len);
                    let reusable = this.upload_failed.is_none();
                    return Poll::Ready(Ok((head, reusable)));
                }
                Err(error) => return Poll::Ready(Err(error.into())),
            }
            let read = ready!(this.conn.poll_fill(cx));
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
            let step = match self.decoder.decode(&conn.buf) {
                Ok(step) => step,
                Err(error) => return self.fail(error.into()),
            };
            if let Some(data) = step.data {
                conn.buf.advance(data.start);
                let bytes = conn.buf.split_to(data.len()).freeze();
                conn.buf.advance(step.consumed - data.end);
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            conn.buf.advance(step.consumed);
            if self.decoder.is_done() {
                self.ended = true;
                return Poll::Ready(None);
            }
            if step.consumed > 0 {
                continue;
            }
            match ready!(conn.poll_fill(cx)) {
                Ok(0) => {
                    self.reusable = false;
                    if let Err(error) = self.decoder.eof() {
                        return self.fail(error.into());
                    }
                    self.ended = true;
                    return Poll::Ready(None);
                }
                Ok(_) => {}
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
            if conn.buf.is_empty() {
                conn.buf = BytesMut::new();
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

    /// A read is copied out at its size, and a stream waiting for its next event holds no read
    /// buffer; a read over [`COPY_MAX`] sends the next one straight into the stream's buffer.
    /// Each read waits for the bytes to be readable (an event), never for a clock.
    #[tokio::test]
    async fn a_waiting_stream_holds_no_read_buffer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (mut upstream, _) = accepted.expect("accept");
        let mut conn = Connection::new(Io::Plain(client.expect("connect")));
        let fill = async |conn: &mut Connection| {
            std::future::poll_fn(|cx| conn.poll_fill(cx))
                .await
                .expect("read")
        };

        upstream.write_all(&[b'e'; 300]).await.expect("write");
        assert_eq!(fill(&mut conn).await, 300);
        assert_eq!(
            (conn.buf.len(), conn.buf.capacity()),
            (300, 300),
            "its size"
        );
        let event = conn.buf.split_to(300).freeze();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(conn.poll_fill(&mut cx).is_pending(), "nothing more yet");
        assert_eq!(conn.buf.capacity(), 0, "no buffer while waiting");
        drop(event);

        let flood = vec![b'f'; 3 * COPY_MAX];
        upstream.write_all(&flood).await.expect("write");
        let mut read = 0;
        while read < flood.len() {
            read += fill(&mut conn).await;
        }
        assert!(conn.flooding, "a read over COPY_MAX was seen");
        conn.buf.clear();
        upstream.write_all(b"x").await.expect("write");
        assert_eq!(fill(&mut conn).await, 1);
        assert!(
            conn.buf.capacity() >= READ_BUF_MAX,
            "read straight into the stream's buffer"
        );
        assert!(!conn.flooding, "a small read: back to the scratch buffer");
    }
}
