//! The socket and read buffer one client connection shares with its request body, and the
//! request body itself ([`Incoming`]): decoded from the same buffer (`http1::decode`) when the
//! handler polls it, as slices of it, with no task or channel between the socket and the
//! handler.
//!
//! The read buffer is sized as the upstream's is (`http1::buffer`: 2 KiB first, doubling while
//! reads fill it, up to 64 KiB); once a request is read whole and its response starts, an empty
//! buffer is given back ([`Reader::answered`]), so a streaming response holds no read buffer at
//! all.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::net::TcpStream;

use crate::http1::Framing;
use crate::http1::buffer::{READ_BUF_FIRST, next_read_size};
use crate::http1::decode::{DecodeError, Decoder};
use crate::http1::server::CONTINUE;

/// What the connection and its request body share.
pub struct Shared {
    pub stream: TcpStream,
    reader: Mutex<Reader>,
}

impl Shared {
    pub fn new(stream: TcpStream) -> Arc<Shared> {
        Arc::new(Shared {
            stream,
            reader: Mutex::new(Reader {
                buf: BytesMut::new(),
                read_size: READ_BUF_FIRST,
                body: BodyState::Done,
                continue_left: 0,
                abandoned: false,
            }),
        })
    }

    pub fn reader(&self) -> MutexGuard<'_, Reader> {
        // Nothing panics while holding it; a poisoned lock's state is still consistent.
        self.reader.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The bytes read and not yet taken, and where the request body stands.
pub struct Reader {
    pub buf: BytesMut,
    read_size: usize,
    body: BodyState,
    /// Bytes of [`CONTINUE`] still to write before the body is read.
    continue_left: usize,
    /// The request body was dropped before its end: nothing will read the rest.
    abandoned: bool,
}

enum BodyState {
    Reading(Decoder),
    /// Read to its end (or there was none).
    Done,
    /// Cut short or malformed: the connection cannot carry another request.
    Failed,
}

impl Reader {
    /// Reads once from `stream` into the buffer; the number of bytes read (0 at end of file).
    pub fn poll_fill(
        &mut self,
        stream: &TcpStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < self.read_size {
            self.buf.reserve(self.read_size);
        }
        loop {
            ready!(stream.poll_read_ready(cx))?;
            match stream.try_read_buf(&mut self.buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
                Ok(n) => {
                    self.read_size = next_read_size(self.read_size, n);
                    return Poll::Ready(Ok(n));
                }
            }
        }
    }

    /// A request head was taken from the buffer: its body, framed so, is read next.
    pub fn begin_body(&mut self, framing: Framing, expect_continue: bool) {
        let decoder = Decoder::new(framing);
        self.continue_left = 0;
        self.abandoned = false;
        if decoder.is_done() {
            self.body = BodyState::Done;
            return;
        }
        self.body = BodyState::Reading(decoder);
        if expect_continue {
            self.continue_left = CONTINUE.len();
        }
    }

    /// The response head is going out: a `100 Continue` not sent by now never is, what is
    /// here of a body its handler dropped unread is skipped, and a buffer with nothing left in
    /// it is given back while the response streams.
    pub fn answered(&mut self) {
        self.continue_left = 0;
        if self.abandoned {
            self.skip_buffered();
        }
        if self.body_done() {
            self.rest();
        }
    }

    /// Decodes and drops what the buffer holds of the body, reading nothing more.
    fn skip_buffered(&mut self) {
        while let BodyState::Reading(decoder) = &mut self.body {
            let Ok(step) = decoder.decode(&self.buf) else {
                self.body = BodyState::Failed;
                return;
            };
            self.buf.advance(step.consumed);
            if decoder.is_done() {
                self.body = BodyState::Done;
            } else if step.consumed == 0 {
                return;
            }
        }
    }

    /// Whether the request body was read to its end (or there was none).
    pub fn body_done(&self) -> bool {
        matches!(self.body, BodyState::Done)
    }

    /// The exchange is over and the connection stays open: an empty buffer is given back.
    pub fn rest(&mut self) {
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
            self.read_size = READ_BUF_FIRST;
        }
    }

    fn poll_continue(&mut self, stream: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.continue_left > 0 {
            ready!(stream.poll_write_ready(cx))?;
            let unsent = &CONTINUE[CONTINUE.len() - self.continue_left..];
            match stream.try_write(unsent) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.continue_left -= n,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the request body: {0}")]
    Decode(#[from] DecodeError),
    #[error("reading the request body: {0}")]
    Io(#[from] io::Error),
}

/// A request body read from its connection's socket as it is polled (hyper's HTTP/2 server
/// hands its own, `hyper::body::Incoming`).
pub struct Incoming {
    shared: Arc<Shared>,
    /// What is left of a `Content-Length` body.
    remaining: Option<u64>,
    ended: bool,
}

impl Incoming {
    pub fn new(shared: Arc<Shared>, framing: Framing) -> Incoming {
        let remaining = match framing {
            Framing::Nothing => Some(0),
            Framing::Length(n) => Some(n),
            Framing::Chunked | Framing::Close => None,
        };
        Incoming {
            shared,
            ended: remaining == Some(0),
            remaining,
        }
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BodyError>>> {
        let shared = &self.shared;
        let mut reader = shared.reader();
        let reader = &mut *reader;
        if let Err(error) = ready!(reader.poll_continue(&shared.stream, cx)) {
            reader.body = BodyState::Failed;
            return Poll::Ready(Some(Err(error.into())));
        }
        loop {
            let BodyState::Reading(decoder) = &mut reader.body else {
                return Poll::Ready(None);
            };
            let step = match decoder.decode(&reader.buf) {
                Ok(step) => step,
                Err(error) => {
                    reader.body = BodyState::Failed;
                    return Poll::Ready(Some(Err(error.into())));
                }
            };
            let done = decoder.is_done();
            let data = step.data.map(|data| {
                reader.buf.advance(data.start);
                let bytes = reader.buf.split_to(data.len()).freeze();
                reader.buf.advance(step.consumed - data.end);
                bytes
            });
            if data.is_none() {
                reader.buf.advance(step.consumed);
            }
            if done {
                reader.body = BodyState::Done;
            }
            if let Some(data) = data {
                return Poll::Ready(Some(Ok(data)));
            }
            if done {
                return Poll::Ready(None);
            }
            if step.consumed > 0 {
                continue;
            }
            match ready!(reader.poll_fill(&shared.stream, cx)) {
                Ok(0) => {
                    reader.body = BodyState::Failed;
                    return Poll::Ready(Some(Err(DecodeError::BodyCut.into())));
                }
                Ok(_) => {}
                Err(error) => {
                    reader.body = BodyState::Failed;
                    return Poll::Ready(Some(Err(error.into())));
                }
            }
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if !self.ended {
            self.shared.reader().abandoned = true;
        }
    }
}

impl Body for Incoming {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let polled = ready!(this.poll_body(cx));
        match &polled {
            Some(Ok(data)) => {
                if let Some(remaining) = &mut this.remaining {
                    *remaining -= data.len() as u64;
                }
            }
            _ => this.ended = true,
        }
        Poll::Ready(polled.map(|r| r.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.remaining == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
