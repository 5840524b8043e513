//! The request body on its way to an HTTP/1 upstream ([`Upload`]), framed by `Content-Length`
//! or chunked as `http1::client::frame` decided, and the vectored writes that send it and the
//! request head.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::Body;
use tokio::io::AsyncWrite;

use super::io::Io;
use crate::http1::Framing;
use crate::http1::encode::{LAST_CHUNK, MAX_SLICES, Out};
use crate::net::upstream::outgoing::Outgoing;

/// Why a request body could not be sent whole.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("reading the request body: {0}")]
    Body(Box<dyn std::error::Error + Send + Sync>),
    #[error("the request body is longer than its Content-Length")]
    TooLong,
    #[error("the request body ended before its Content-Length")]
    TooShort,
    #[error("writing the request to the upstream: {0}")]
    Write(#[from] io::Error),
}

/// A request body being written: frames taken from the body as the connection can take them
/// (the body is only polled once what came before is written, so it is read no faster than the
/// upstream reads), each framed as the head said.
pub struct Upload {
    body: Outgoing,
    framing: Framing,
    /// What is left of a `Content-Length` body.
    remaining: u64,
    /// Bytes framed and not yet written (a chunk's size line, its data, its CRLF).
    pending: Out,
    /// The body ended and its end is queued.
    ended: bool,
}

impl Upload {
    /// `framing` is `Length` or `Chunked`, as a request's is.
    pub fn new(body: Outgoing, framing: Framing) -> Upload {
        let remaining = match framing {
            Framing::Length(n) => n,
            Framing::Nothing | Framing::Chunked | Framing::Close => 0,
        };
        Upload {
            body,
            framing,
            remaining,
            pending: Out::default(),
            ended: false,
        }
    }

    /// Writes what it can; ready once the whole body is written and flushed.
    pub fn poll(&mut self, io: &mut Io, cx: &mut Context<'_>) -> Poll<Result<(), UploadError>> {
        loop {
            if !self.pending.is_empty() {
                ready!(write_some(io, &mut self.pending, cx))?;
                continue;
            }
            if self.ended {
                ready!(Pin::new(&mut *io).poll_flush(cx))?;
                return Poll::Ready(Ok(()));
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers are not sent (hyper's client sends them only when the request
                    // announced them, which a proxied request cannot: `Trailer` is hop-by-hop).
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        self.queue(data)?;
                    }
                }
                Some(Err(e)) => return Poll::Ready(Err(UploadError::Body(e))),
                None => self.end()?,
            }
        }
    }

    fn queue(&mut self, data: Bytes) -> Result<(), UploadError> {
        match self.framing {
            Framing::Chunked => self.pending.push_chunk(data),
            _ => {
                let len = data.len() as u64;
                if len > self.remaining {
                    return Err(UploadError::TooLong);
                }
                self.remaining -= len;
                self.pending.push(None, data, b"");
            }
        }
        Ok(())
    }

    fn end(&mut self) -> Result<(), UploadError> {
        self.ended = true;
        match self.framing {
            Framing::Chunked => {
                self.pending.push(None, Bytes::new(), LAST_CHUNK);
                Ok(())
            }
            _ if self.remaining > 0 => Err(UploadError::TooShort),
            _ => Ok(()),
        }
    }
}

/// Writes from the front of `pending` (vectored where the stream takes it), dropping what was
/// written; ready after one write.
pub fn write_some(io: &mut Io, pending: &mut Out, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    let mut slices = [IoSlice::new(&[]); MAX_SLICES];
    let n = pending.slices(&mut slices);
    let written = if io.is_write_vectored() && n > 1 {
        ready!(Pin::new(&mut *io).poll_write_vectored(cx, &slices[..n]))?
    } else {
        let front = slices.first().map_or(&[][..], |slice| &slice[..]);
        ready!(Pin::new(&mut *io).poll_write(cx, front))?
    };
    if written == 0 {
        return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
    }
    pending.advance(written);
    Poll::Ready(Ok(()))
}
