//! Request bodies on their way to the gateway. Every body streams through untouched, except a
//! `POST …/responses` body, which is read (up to [`MAX_READ_BODY_BYTES`]) so that the hosted
//! items a client replays become the gateway's pairs again and companions are removed
//! ([`crate::hosted::request::map_input`]), and the `function` tools it declares are known. A
//! body over the limit goes on unchanged: what was read first, then the rest as it streams.
//! The MCP front reads `tools/call` bodies the same way ([`read_up_to`]).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{HeaderValue, Method, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::config::Config;
use crate::dialect::request::declared_functions;
use crate::hosted::request::map_input;
use crate::hosted::store::PairStore;
use crate::metrics::Metrics;

/// The largest request body read whole to remove companions from it.
pub const MAX_READ_BODY_BYTES: usize = 4 << 20;

/// A request body for the upstream: streamed, or (partly) read first.
pub enum RequestBody {
    Streamed(Incoming),
    Read {
        frames: VecDeque<Frame<Bytes>>,
        rest: Option<Incoming>,
    },
}

/// Whether the request's body is read for companions.
pub fn is_responses_create(head: &Parts) -> bool {
    head.method == Method::POST && head.uri.path().ends_with("/responses")
}

/// What the proxy learned from a request body.
#[derive(Debug, Default)]
pub struct RequestFacts {
    /// The `function` tools the request declares (their calls are the client's).
    pub client_functions: Vec<String>,
}

/// Reads a `POST …/responses` body, maps the hosted items in its `input` back to the gateway's
/// pairs and removes companions, fixing `Content-Length`. Other bodies, and any body over the
/// limit, go on as they are.
pub async fn prepare(
    head: &mut Parts,
    body: Incoming,
    config: &Config,
    store: &dyn PairStore,
    metrics: &Metrics,
) -> Result<(RequestBody, RequestFacts), hyper::Error> {
    let mut facts = RequestFacts::default();
    if !is_responses_create(head) {
        return Ok((RequestBody::Streamed(body), facts));
    }
    let (mut frames, rest) = read_up_to(body, MAX_READ_BODY_BYTES).await?;
    if rest.is_some() {
        tracing::info!(
            limit = MAX_READ_BODY_BYTES,
            "request body over the read limit: forwarded without mapping hosted items"
        );
        return Ok((RequestBody::Read { frames, rest }, facts));
    }
    if let Some(whole) = whole(&frames) {
        facts.client_functions = declared_functions(&whole);
        let now = std::time::Instant::now();
        let (body, mapped) = map_input(&whole, &config.hosted.key, store, now);
        metrics.hosted_mapped(&mapped);
        if mapped.from_content > 0 || mapped.dropped > 0 {
            tracing::info!(
                from_content = mapped.from_content,
                dropped = mapped.dropped,
                "hosted items the store did not have (expired, another deployment's, or forged): mapped from their content"
            );
        }
        if let Some(body) = body {
            tracing::debug!(?mapped, "mapped the request's input for the gateway");
            head.headers
                .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
            frames = VecDeque::from([Frame::data(Bytes::from(body))]);
        }
    }
    Ok((RequestBody::Read { frames, rest: None }, facts))
}

/// Reads `body` to its end, or until more than `limit` bytes were read: then the unread rest
/// comes back too.
pub async fn read_up_to(
    mut body: Incoming,
    limit: usize,
) -> Result<(VecDeque<Frame<Bytes>>, Option<Incoming>), hyper::Error> {
    let mut frames = VecDeque::new();
    let mut read = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        read += frame.data_ref().map_or(0, Bytes::len);
        frames.push_back(frame);
        if read > limit {
            return Ok((frames, Some(body)));
        }
    }
    Ok((frames, None))
}

/// The bytes of a body read whole; `None` when it had trailers.
pub fn whole(frames: &VecDeque<Frame<Bytes>>) -> Option<BytesMut> {
    if !frames.iter().all(Frame::is_data) {
        return None;
    }
    let len = frames
        .iter()
        .filter_map(Frame::data_ref)
        .map(Bytes::len)
        .sum();
    let mut whole = BytesMut::with_capacity(len);
    for data in frames.iter().filter_map(Frame::data_ref) {
        whole.extend_from_slice(data);
    }
    Some(whole)
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            RequestBody::Streamed(body) => Pin::new(body).poll_frame(cx),
            RequestBody::Read { frames, rest } => match (frames.pop_front(), rest) {
                (Some(frame), _) => Poll::Ready(Some(Ok(frame))),
                (None, Some(body)) => Pin::new(body).poll_frame(cx),
                (None, None) => Poll::Ready(None),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Streamed(body) => body.is_end_stream(),
            RequestBody::Read { frames, rest } => {
                frames.is_empty() && rest.as_ref().is_none_or(Body::is_end_stream)
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Streamed(body) => body.size_hint(),
            RequestBody::Read { frames, rest } => {
                let read: usize = frames
                    .iter()
                    .filter_map(|f| f.data_ref())
                    .map(Bytes::len)
                    .sum();
                let rest = rest
                    .as_ref()
                    .map_or(SizeHint::with_exact(0), Body::size_hint);
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
