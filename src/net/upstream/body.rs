//! The upstream response body: read by toolpulse's own HTTP/1 reader from the connection it
//! owns ([`H1Body`]: no task, no channel), or by hyper for an HTTP/2 upstream (whose shared
//! connection has a task of its own).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::h1::conn::H1Body;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub enum UpstreamBody {
    H1(H1Body),
    Shared(Incoming),
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            UpstreamBody::H1(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            UpstreamBody::Shared(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamBody::H1(body) => body.is_end_stream(),
            UpstreamBody::Shared(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::H1(body) => body.size_hint(),
            UpstreamBody::Shared(body) => body.size_hint(),
        }
    }
}
