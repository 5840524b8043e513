//! A request body on its way to an upstream (the gateway, or an MCP server through the MCP
//! front's client): streamed from the client as it comes ([`Paced`]), or read first (whole, or
//! its part within a limit) and held within the body budget until it is sent, the rest of a
//! body over the limit then streamed and, when the caller asks, looked at on its way
//! ([`Check`]). Why a body is read and what is made of it are the caller's.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::net::budget::{self, Fault, Held, Paced};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body for an upstream: streamed, or (partly) read first.
pub enum Outgoing {
    Streamed(Paced),
    Read {
        frames: VecDeque<Frame<Bytes>>,
        /// The part of the body budget the frames hold, given back once they are sent.
        held: Held,
        rest: Option<Rest>,
    },
}

impl Outgoing {
    /// The body's bytes when it is all in memory, in one piece (a body read whole).
    pub fn in_memory(&self) -> Option<Bytes> {
        match self {
            Outgoing::Read {
                frames, rest: None, ..
            } => budget::whole(frames),
            _ => None,
        }
    }

    /// Where a failure of the part streamed from the client (cut short, malformed, too slow)
    /// is told, so that it is answered as the client's error, not the upstream's.
    pub fn fault(&self) -> Fault {
        match self {
            Outgoing::Streamed(body) => body.fault(),
            Outgoing::Read {
                rest: Some(rest), ..
            } => rest.body.fault(),
            Outgoing::Read { rest: None, .. } => Fault::default(),
        }
    }

    /// A body read by [`budget::read_up_to`], its rest (if any) forwarded unchecked.
    pub fn read(read: budget::Read) -> Self {
        Outgoing::Read {
            frames: read.frames,
            held: read.held,
            rest: read.rest.map(|body| Rest { body, check: None }),
        }
    }
}

/// Looks at the data of a body's streamed rest as it goes out: an error breaks the body off
/// there (the upstream sees it cut short), and is what the body's poll returns.
pub trait Check: Send {
    fn check(&mut self, data: &Bytes) -> Result<(), BoxError>;
}

/// The unread rest of a body over the read limit, streamed.
pub struct Rest {
    body: Paced,
    check: Option<Box<dyn Check>>,
}

impl Rest {
    /// A rest whose every data frame `check` sees before it goes out.
    pub fn checked(body: Paced, check: Box<dyn Check>) -> Rest {
        Rest {
            body,
            check: Some(check),
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let frame = ready!(Pin::new(&mut self.body).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
            && let Some(check) = &mut self.check
            && let Err(error) = check.check(data)
        {
            return Poll::Ready(Some(Err(error)));
        }
        Poll::Ready(frame)
    }
}

impl Body for Outgoing {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Outgoing::Streamed(body) => Pin::new(body).poll_frame(cx),
            Outgoing::Read { frames, held, rest } => {
                let frame = frames.pop_front();
                if frames.is_empty() {
                    // Sent on (or being sent): the bytes are the upstream client's now.
                    held.release();
                }
                match (frame, rest) {
                    (Some(frame), _) => Poll::Ready(Some(Ok(frame))),
                    (None, Some(rest)) => rest.poll_frame(cx),
                    (None, None) => Poll::Ready(None),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Outgoing::Streamed(body) => body.is_end_stream(),
            Outgoing::Read { frames, rest, .. } => {
                frames.is_empty() && rest.as_ref().is_none_or(|rest| rest.body.is_end_stream())
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Outgoing::Streamed(body) => body.size_hint(),
            Outgoing::Read { frames, rest, .. } => {
                let read: usize = frames
                    .iter()
                    .filter_map(|f| f.data_ref())
                    .map(Bytes::len)
                    .sum();
                let rest = rest
                    .as_ref()
                    .map_or(SizeHint::with_exact(0), |rest| rest.body.size_hint());
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower() + read as u64);
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper + read as u64);
                }
                hint
            }
        }
    }
}
