//! Request bodies on their way to the gateway. Every body streams through untouched, except a
//! `POST …/responses` body (any spelling of that path, any `Content-Type`), which is read (up
//! to [`MAX_READ_BODY_BYTES`]) so that the hosted items a client replays become the gateway's
//! pairs again and companions are removed ([`crate::features::hosted::request::map_input`]), and the
//! `function` tools it declares are known. The pairs are the caller's only (its credentials'
//! digest, [`owner`]); the body mapping builds is bounded (`[hosted] max_mapped_body_bytes`)
//! and charged to the body budget before it is written; a body whose hosted items cannot be
//! mapped is refused (400), never forwarded with them left out.
//!
//! A body over the limit goes on unchanged (what was read first, then the rest as it streams),
//! scanned for hosted ids this deployment signed ([`SignedIdScan`]): the gateway never made
//! those items, so a body holding one is refused, before anything is sent when the id is in the
//! part read first, else by breaking off the body on its way (the client then gets a 400
//! saying so, [`Refusal`]). The MCP front reads `tools/call` bodies the same way. Bodies read
//! are held within a budget and a deadline, and streamed ones may pause only so long
//! ([`crate::net::budget`]).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use crate::net::listen::ClientBody;
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Method, header};
use http_body::{Body, Frame, SizeHint};

use super::next_turn::{Mapping, owner};
use crate::config::Config;
use crate::core::dialect::request::declared_functions;
use crate::features::hosted::id::Owner;
use crate::features::hosted::request;
use crate::features::hosted::scan::SignedIdScan;
use crate::features::hosted::shared::Pairs;
use crate::metrics::Metrics;
use crate::net::budget::{self, BodyBudget, Fault, Held, Paced, ReadError};

/// The largest request body read whole to remove companions from it.
pub const MAX_READ_BODY_BYTES: usize = 4 << 20;

/// A request body for the upstream: streamed, or (partly) read first.
pub enum RequestBody {
    Streamed(Paced),
    Read {
        frames: VecDeque<Frame<Bytes>>,
        /// The part of the body budget the frames hold, given back once they are sent.
        held: Held,
        rest: Option<Rest>,
    },
}

impl RequestBody {
    /// The body's bytes when it is all in memory, in one piece (a body read whole).
    pub fn in_memory(&self) -> Option<Bytes> {
        match self {
            RequestBody::Read {
                frames, rest: None, ..
            } => whole(frames),
            _ => None,
        }
    }

    /// Where a failure of the part streamed from the client (cut short, malformed, too slow)
    /// is told, so that it is answered as the client's error, not the upstream's.
    pub fn fault(&self) -> Fault {
        match self {
            RequestBody::Streamed(body) => body.fault(),
            RequestBody::Read {
                rest: Some(rest), ..
            } => rest.body.fault(),
            RequestBody::Read { rest: None, .. } => Fault::default(),
        }
    }

    /// A body read by [`budget::read_up_to`], its rest (if any) forwarded unscanned.
    pub fn read(read: budget::Read) -> Self {
        RequestBody::Read {
            frames: read.frames,
            held: read.held,
            rest: read.rest.map(Rest::unscanned),
        }
    }
}

/// The unread rest of a body over the read limit, scanned as it streams.
pub struct Rest {
    body: Paced,
    scan: Option<SignedIdScan>,
    refused: Refusal,
}

impl Rest {
    /// A rest forwarded as it is, not scanned (the MCP front's bodies).
    pub fn unscanned(body: Paced) -> Rest {
        Rest {
            body,
            scan: None,
            refused: Refusal::default(),
        }
    }
}

/// Set when a body over the read limit turned out to hold a hosted id: the body was broken off
/// and the client is told why.
#[derive(Debug, Clone, Default)]
pub struct Refusal(Arc<AtomicBool>);

impl Refusal {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Why a body is not forwarded.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("{0}")]
    Read(#[from] ReadError),
    #[error("{}", HOSTED_PAST_LIMIT)]
    HostedPastLimit,
    /// Its hosted items cannot be mapped back (too large once mapped, gone, ambiguous).
    #[error("{0}")]
    Hosted(#[from] request::Refusal),
}

/// What a client is told when its body is over the read limit and holds hosted items.
pub const HOSTED_PAST_LIMIT: &str = "the request body is larger than toolpulse reads whole (4 MiB) \
     and holds items toolpulse made (hosted mcp_call, web_search_call or file_search_call \
     items, or references to them), which it cannot map back to the gateway's items in such a \
     body: send the large parts (files, images) by reference, or fewer turns of history";

/// Whether the request's body is read for hosted items and companions: a `POST …/responses`,
/// whatever its `Content-Type` says (a gateway may read a body labelled `text/plain` as JSON
/// all the same), and however its last path segment is written where a gateway may route it
/// alike: a trailing `/`, another case, percent-escapes, `;` parameters.
pub fn is_responses_create(head: &Parts) -> bool {
    head.method == Method::POST && is_responses_path(head.uri.path())
}

fn is_responses_path(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    let last = path.rsplit('/').next().unwrap_or_default();
    let last = last.split(';').next().unwrap_or_default();
    path.contains('/') && percent_decoded(last).eq_ignore_ascii_case(b"responses")
}

/// `text` with its `%XX` escapes decoded (others kept as they are).
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(byte) if bytes[at] == b'%' => {
                out.push(byte);
                at += 3;
            }
            _ => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    out
}

/// Whether a body may be JSON: labelled so, or not labelled, or labelled as `curl -d` does by
/// default (`application/x-www-form-urlencoded`, which people sending JSON leave by accident).
/// Any other type (multipart uploads, octet streams) is streamed, never read.
pub fn may_be_json(head: &Parts) -> bool {
    let Some(value) = head.headers.get(header::CONTENT_TYPE) else {
        return true;
    };
    let value = String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase();
    let media = value.split(';').next().unwrap_or("").trim();
    media.ends_with("json")
        || media.ends_with("+json")
        || media == "application/x-www-form-urlencoded"
}

/// What the proxy learned from a request body.
#[derive(Debug, Default)]
pub struct RequestFacts {
    /// The `function` tools the request declares (their calls are the client's).
    pub client_functions: Vec<String>,
    /// Set when a body over the read limit is broken off for holding a hosted id.
    pub refusal: Refusal,
    /// The caller, whose pairs the response's hosted items become.
    pub owner: Owner,
}

/// Reads a `POST …/responses` body, maps the hosted items in its `input` back to the gateway's
/// pairs and removes companions, fixing `Content-Length`. Other bodies, and any body over the
/// limit, go on as they are.
pub async fn prepare(
    head: &mut Parts,
    body: ClientBody,
    config: &Config,
    store: &Pairs,
    metrics: &Metrics,
    budget: &BodyBudget,
) -> Result<(RequestBody, RequestFacts), PrepareError> {
    let mut facts = RequestFacts {
        owner: owner(head, config),
        ..RequestFacts::default()
    };
    let owner = facts.owner;
    let timeout = config.clients.body_timeout;
    if !is_responses_create(head) {
        return Ok((RequestBody::Streamed(Paced::new(body, timeout)), facts));
    }
    let read = budget::read_up_to(body, MAX_READ_BODY_BYTES, budget, timeout).await?;
    let (mut frames, held) = (read.frames, read.held);
    if let Some(body) = read.rest {
        let mut scan = SignedIdScan::new(config.hosted.key.clone());
        let mut read = frames.iter().filter_map(Frame::data_ref);
        if read.any(|data| scan.feed(data)) {
            return Err(PrepareError::HostedPastLimit);
        }
        tracing::info!(
            limit = MAX_READ_BODY_BYTES,
            "request body over the read limit: forwarded as it is, scanned for hosted ids"
        );
        let refused = facts.refusal.clone();
        let rest = Rest {
            body,
            scan: Some(scan),
            refused,
        };
        let rest = Some(rest);
        return Ok((RequestBody::Read { frames, held, rest }, facts));
    }
    if let Some(whole) = whole(&frames) {
        facts.client_functions = declared_functions(&whole);
        let now = std::time::Instant::now();
        let mut held = held;
        let mapping = Mapping {
            config,
            store,
            metrics,
            budget,
        };
        match mapping.map(&whole, owner, &mut held, now).await {
            Ok(Some(body)) => {
                head.headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
                frames = VecDeque::from([Frame::data(Bytes::from(body))]);
            }
            Ok(None) => {}
            Err(PrepareError::Hosted(refusal)) => {
                metrics.hosted_refused(refusal.reason());
                return Err(PrepareError::Hosted(refusal));
            }
            Err(e) => return Err(e),
        }
        let rest = None;
        return Ok((RequestBody::Read { frames, held, rest }, facts));
    }
    // A body with trailers is not mapped: one that holds a signed id must not go on as it is.
    let mut scan = SignedIdScan::new(config.hosted.key.clone());
    if frames
        .iter()
        .filter_map(Frame::data_ref)
        .any(|d| scan.feed(d))
    {
        metrics.hosted_refused(request::Refusal::Unreadable.reason());
        return Err(request::Refusal::Unreadable.into());
    }
    let rest = None;
    Ok((RequestBody::Read { frames, held, rest }, facts))
}

/// The bytes of a body read whole ([`budget::read_up_to`] puts them in one frame); `None`
/// when it had trailers.
pub fn whole(frames: &VecDeque<Frame<Bytes>>) -> Option<Bytes> {
    let mut frames = frames.iter();
    match (frames.next(), frames.next()) {
        (None, _) => Some(Bytes::new()),
        (Some(frame), None) => frame.data_ref().cloned(),
        _ => None,
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Rest {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let frame = std::task::ready!(Pin::new(&mut self.body).poll_frame(cx));
        if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref))
            && let Some(data) = data
            && let Some(scan) = &mut self.scan
            && scan.feed(data)
        {
            self.refused.0.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(PrepareError::HostedPastLimit.into())));
        }
        Poll::Ready(frame)
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            RequestBody::Streamed(body) => Pin::new(body).poll_frame(cx),
            RequestBody::Read { frames, held, rest } => {
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
            RequestBody::Streamed(body) => body.is_end_stream(),
            RequestBody::Read { frames, rest, .. } => {
                frames.is_empty() && rest.as_ref().is_none_or(|rest| rest.body.is_end_stream())
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Streamed(body) => body.size_hint(),
            RequestBody::Read { frames, rest, .. } => {
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
