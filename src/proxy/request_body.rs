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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Method, header};
use http_body::Frame;

pub use super::body_refusal::{HOSTED_PAST_LIMIT, PrepareError};
use super::next_turn::{Mapping, owner};
use crate::config::Config;
use crate::core::dialect::request::TopLevel;
use crate::features::hosted::id::Owner;
use crate::features::hosted::request::{self, Turn};
use crate::features::hosted::scan::SignedIdScan;
use crate::features::hosted::shared::Pairs;
use crate::metrics::Metrics;
use crate::net::budget::{self, BodyBudget, Paced, whole};
use crate::net::listen::ClientBody;
use crate::net::upstream::outgoing::{Check, Outgoing, Rest};

/// The largest request body read whole to remove companions from it.
pub const MAX_READ_BODY_BYTES: usize = 4 << 20;

/// Set when a body over the read limit turned out to hold a hosted id: the body was broken off
/// and the client is told why.
#[derive(Debug, Clone, Default)]
pub struct Refusal(Arc<AtomicBool>);

impl Refusal {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The rest of a body over the read limit, scanned for hosted ids this deployment signed as it
/// streams: one breaks the body off, and the client is told why ([`Refusal`]).
struct SignedIds {
    scan: SignedIdScan,
    refused: Refusal,
}

impl Check for SignedIds {
    fn check(&mut self, data: &Bytes) -> Result<(), BoxError> {
        if self.scan.feed(data) {
            self.refused.0.store(true, Ordering::Release);
            return Err(PrepareError::HostedPastLimit.into());
        }
        Ok(())
    }
}

/// Whether the request's body is read for hosted items and companions: a `POST …/responses`,
/// whatever its `Content-Type` says (a gateway may read a body labelled `text/plain` as JSON
/// all the same), and however its last path segment is written where a gateway may route it
/// alike: a trailing `/`, another case, percent-escapes, `;` parameters.
pub fn is_responses_create(head: &Parts) -> bool {
    head.method == Method::POST && is_responses_path(head.uri.path())
}

fn is_responses_path(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    let Some(slash) = path.rfind('/') else {
        return false;
    };
    let last = &path[slash + 1..];
    let last = last.find(';').map_or(last, |semicolon| &last[..semicolon]);
    decodes_to(last, b"responses")
}

/// Whether `text` with its `%XX` escapes decoded (others kept as they are) is `word`, in any
/// ASCII case; decoded as it is compared, nothing built.
fn decodes_to(text: &str, word: &[u8]) -> bool {
    let bytes = text.as_bytes();
    let mut word = word.iter();
    let mut at = 0;
    while at < bytes.len() {
        let escaped = match bytes[at] {
            b'%' => escape(bytes.get(at + 1..at + 3)),
            _ => None,
        };
        let (byte, width) = match escaped {
            Some(byte) => (byte, 3),
            None => (bytes[at], 1),
        };
        if !word.next().is_some_and(|w| w.eq_ignore_ascii_case(&byte)) {
            return false;
        }
        at += width;
    }
    word.next().is_none()
}

/// The byte a `%XX` escape's two characters stand for, as `u8::from_str_radix` reads them.
fn escape(hex: Option<&[u8]>) -> Option<u8> {
    let hex = std::str::from_utf8(hex?).ok()?;
    u8::from_str_radix(hex, 16).ok()
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

/// Reads a `POST …/responses` body (`responses_create`: [`is_responses_create`] of `head`), maps the hosted items in its `input` back to the gateway's
/// pairs and removes companions, fixing `Content-Length`. Other bodies, and any body over the
/// limit, go on as they are.
pub async fn prepare(
    (head, responses_create): (&mut Parts, bool),
    body: ClientBody,
    config: &Config,
    store: &Pairs,
    metrics: &Metrics,
    budget: &BodyBudget,
) -> Result<(Outgoing, RequestFacts), PrepareError> {
    let mut facts = RequestFacts {
        owner: owner(head, config),
        ..RequestFacts::default()
    };
    let owner = facts.owner;
    let timeout = config.clients.body_timeout;
    if !responses_create {
        return Ok((Outgoing::Streamed(Paced::new(body, timeout)), facts));
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
        let rest = Some(Rest::checked(body, Box::new(SignedIds { scan, refused })));
        return Ok((Outgoing::Read { frames, held, rest }, facts));
    }
    if let Some(whole) = whole(&frames) {
        let top = TopLevel::of(&whole);
        facts.client_functions = top.declared_functions();
        let now = std::time::Instant::now();
        let mut held = held;
        let mapping = Mapping {
            config,
            store,
            metrics,
            budget,
        };
        match mapping.map(Turn::of(top), owner, &mut held, now).await {
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
        return Ok((Outgoing::Read { frames, held, rest }, facts));
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
    Ok((Outgoing::Read { frames, held, rest }, facts))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::is_responses_path;

    /// Every spelling a gateway may route as `…/responses`, and near misses.
    #[test]
    fn responses_paths_in_any_spelling() {
        for path in [
            "/v1/responses",
            "/responses",
            "/v1/responses/",
            "/v1/responses//",
            "/v1/RESPONSES",
            "/v1/%72esponses",
            "/v1/%72%45sponses",
            "/api/v1/responses;a=b",
        ] {
            assert!(is_responses_path(path), "{path}");
        }
        for path in [
            "responses",
            "/v1/responses/r",
            "/v1/responsesx",
            "/v1/responses%3b",
            "/v1/respons",
            "/v1/respons%",
            "/v1/responses%",
            "/v1/%+72esponses",
            "/v1/%7",
            "/v1/",
            "",
        ] {
            assert!(!is_responses_path(path), "{path}");
        }
    }
}
