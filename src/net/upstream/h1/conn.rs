//! One HTTP/1.1 connection to the upstream, read and written by toolpulse itself: the request
//! head written with one write (with the body, when it is in memory), the response head parsed
//! from the read buffer ([`head`]), the body decoded from the same buffer ([`decode`]) and handed
//! on as slices of it — no task, no channel, no second buffer. Shaped after pingora's HTTP/1
//! client (`protocols/http/v1/client.rs`) and hyper's `proto/h1`.
//!
//! The read buffer starts at [`READ_BUF_FIRST`], doubles while reads fill it, up to
//! [`READ_BUF_MAX`], and halves again after reads that use less than half of it, down to
//! [`READ_BUF_MIN`].

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::decode::{DecodeError, Decoder};
use super::head::{self, HeadError, Parsed};
use super::io::Io;
use super::request::{self, Framing, Upload, UploadError};
use crate::net::upstream::pool::{Idle, Pool};
use crate::proxy::request_body::RequestBody;

/// The read buffer's first size: a paced stream's events are a few hundred bytes, and every
/// open stream holds one buffer, so one that never fills it stays this small.
pub const READ_BUF_FIRST: usize = 2 * 1024;
/// The least a read buffer that once filled shrinks back to. Lower, a flood's reads (whatever
/// the socket holds, often less than half the buffer with many streams on one CPU) shrink it
/// again and again: with 2 KiB, a flood cost 1.11–1.21× nginx's CPU per event against
/// 0.77–1.10× with 4 KiB (`bench/run.sh`, flood phase, alternating runs).
pub const READ_BUF_MIN: usize = 4 * 1024;
/// The most one read takes (a flooding stream holds at most this much per read).
pub const READ_BUF_MAX: usize = crate::net::client::READ_BUF_MAX;
/// A request body in memory up to this size goes out in the head's write.
const COALESCE_MAX: usize = 64 * 1024;

/// What went wrong on an exchange.
#[derive(Debug, thiserror::Error)]
pub enum H1Error {
    #[error("{0}")]
    Head(#[from] HeadError),
    #[error("{0}")]
    Body(#[from] DecodeError),
    #[error("{0}")]
    Upload(#[from] UploadError),
    #[error("the upstream connection failed: {0}")]
    Io(#[from] io::Error),
    #[error("the upstream closed the connection before its response head")]
    ClosedBeforeHead,
}

pub struct Connection {
    io: Io,
    buf: BytesMut,
    /// How much the next read asks for.
    read_size: usize,
}

impl Connection {
    pub fn new(io: Io) -> Box<Connection> {
        Box::new(Connection {
            io,
            buf: BytesMut::new(),
            read_size: READ_BUF_FIRST,
        })
    }

    /// Whether the connection can take a request: nothing to read and no end of file, without
    /// waiting (the upstream closed, reset or sent something unasked while it was idle).
    pub fn is_open(&mut self) -> bool {
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

    /// Reads once into the buffer; the number of bytes read (0 at end of file).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < self.read_size {
            self.buf.reserve(self.read_size);
        }
        let n = ready!(tokio_util::io::poll_read_buf(
            Pin::new(&mut self.io),
            cx,
            &mut self.buf
        ))?;
        self.read_size = next_read_size(self.read_size, n);
        Poll::Ready(Ok(n))
    }

    /// Writes all of `parts`, vectored.
    async fn write_all(&mut self, parts: &mut VecDeque<Bytes>) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            while !parts.is_empty() {
                ready!(request::write_some(&mut self.io, parts, cx))?;
            }
            Pin::new(&mut self.io).poll_flush(cx)
        })
        .await
    }
}

/// The size of the next read after one of `read` bytes into `size`: doubled after a full read,
/// halved after one that used less than half, within [`READ_BUF_MIN`] (once above it) and
/// [`READ_BUF_MAX`].
pub(crate) fn next_read_size(size: usize, read: usize) -> usize {
    if read >= size {
        (size * 2).min(READ_BUF_MAX)
    } else if read < size / 2 && size > READ_BUF_MIN {
        (size / 2).max(READ_BUF_MIN)
    } else {
        size
    }
}

/// A request that got no response head; `request` is back when nothing of it was written.
pub struct NotSent {
    pub error: H1Error,
    pub request: Option<Request<RequestBody>>,
}

/// Sends `request` on `conn` and reads the response head; the connection then goes with the
/// response body, which hands it back to `pool` when it ends cleanly.
pub async fn send(
    mut conn: Box<Connection>,
    request: Request<RequestBody>,
    pool: &Arc<Pool>,
) -> Result<Response<H1Body>, NotSent> {
    let (mut parts, body) = request.into_parts();
    let framing = request::frame(&mut parts, &body);
    let mut out = VecDeque::from([request::encode_head(&parts).freeze()]);
    let in_memory = match framing {
        Framing::Length(0) => Some(Bytes::new()),
        Framing::Length(n) if n <= COALESCE_MAX as u64 => body.in_memory(),
        _ => None,
    };
    if let Some(data) = &in_memory {
        out.extend((!data.is_empty()).then(|| data.clone()));
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

/// Whether `buf` has a blank line (`\n\n` or `\n\r\n`) that is not all in `buf[..searched]`.
pub(crate) fn has_blank_line(buf: &[u8], searched: usize) -> bool {
    let from = searched.saturating_sub(2).min(buf.len());
    memchr::memchr_iter(b'\n', &buf[from..]).any(|at| {
        let rest = &buf[from + at + 1..];
        rest.starts_with(b"\n") || rest.starts_with(b"\r\n")
    })
}

impl std::future::Future for Exchange<'_> {
    /// The final head, and whether the connection may be reused after its body.
    type Output = Result<(head::Head, bool), H1Error>;

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
            let complete = has_blank_line(buf, this.searched) || buf.len() >= head::MAX_HEAD_BYTES;
            this.searched = buf.len();
            let parsed = match complete {
                true => head::parse(buf, this.method),
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
    pool: Arc<Pool>,
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
        if let Some(conn) = self.conn.take() {
            self.pool.put(Idle::new(conn));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{READ_BUF_FIRST, READ_BUF_MAX, READ_BUF_MIN, has_blank_line, next_read_size};

    #[test]
    fn reads_grow_when_full_and_shrink_no_lower_than_the_floor_once_grown() {
        // A paced stream's small reads keep the first, smaller size.
        assert_eq!(next_read_size(READ_BUF_FIRST, 200), READ_BUF_FIRST);
        assert_eq!(
            next_read_size(READ_BUF_FIRST, READ_BUF_FIRST),
            2 * READ_BUF_FIRST
        );
        assert_eq!(next_read_size(16 * 1024, 1000), 8 * 1024);
        assert_eq!(
            next_read_size(READ_BUF_MIN, 10),
            READ_BUF_MIN,
            "the floor, once grown"
        );
        assert_eq!(next_read_size(READ_BUF_MAX, READ_BUF_MAX), READ_BUF_MAX);
        assert_eq!(
            next_read_size(8 * 1024, 5000),
            8 * 1024,
            "more than half used"
        );
    }

    #[test]
    fn a_blank_line_is_found_across_reads() {
        let head = b"HTTP/1.1 200 OK\r\nx: y\r\n\r\n";
        // Every way the head can have come in two reads finds the blank line only at its end.
        for cut in 0..head.len() {
            let first = has_blank_line(&head[..cut], 0);
            assert!(!first, "{cut}");
            assert!(has_blank_line(head, cut), "{cut}");
        }
        assert!(has_blank_line(b"HTTP/1.0 200 OK\n\n", 0));
        assert!(!has_blank_line(b"HTTP/1.1 200 OK\r\nx: y\r\n", 0));
    }
}
