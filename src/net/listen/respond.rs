//! What a listener does with each request: [`Respond`], a handler of requests of either HTTP
//! version, and [`ClientBody`], the request body it gets.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};

use super::h1;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Answers a request: implemented by every `Fn(Request<ClientBody>) -> impl Future<Output =
/// Response<B>>`.
pub trait Respond: Send + Unpin + 'static {
    type Body: Body<Data = Bytes, Error: Into<BoxError>> + Send + Unpin + 'static;
    type Future: Future<Output = Response<Self::Body>> + Send + 'static;

    fn respond(&self, request: Request<ClientBody>) -> Self::Future;
}

impl<F, Fut, B> Respond for F
where
    F: Fn(Request<ClientBody>) -> Fut + Send + Unpin + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes, Error: Into<BoxError>> + Send + Unpin + 'static,
{
    type Body = B;
    type Future = Fut;

    fn respond(&self, request: Request<ClientBody>) -> Fut {
        self(request)
    }
}

/// A request body from a client: read by toolpulse's HTTP/1 server, or by hyper's HTTP/2.
pub enum ClientBody {
    /// The request has no body.
    Empty,
    H1(h1::body::Incoming),
    H2(hyper::body::Incoming),
}

impl From<hyper::body::Incoming> for ClientBody {
    fn from(body: hyper::body::Incoming) -> Self {
        ClientBody::H2(body)
    }
}

fn boxed<E: Into<BoxError>>(
    frame: Option<Result<Frame<Bytes>, E>>,
) -> Option<Result<Frame<Bytes>, BoxError>> {
    frame.map(|f| f.map_err(Into::into))
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ClientBody::Empty => Poll::Ready(None),
            ClientBody::H1(body) => Pin::new(body).poll_frame(cx).map(boxed),
            ClientBody::H2(body) => Pin::new(body).poll_frame(cx).map(boxed),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Empty => true,
            ClientBody::H1(body) => body.is_end_stream(),
            ClientBody::H2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Empty => SizeHint::with_exact(0),
            ClientBody::H1(body) => body.size_hint(),
            ClientBody::H2(body) => body.size_hint(),
        }
    }
}
