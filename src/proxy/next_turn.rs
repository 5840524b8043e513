//! A next turn's body read whole, mapped for the gateway: the caller's pairs looked up (once per
//! distinct id), hosted items mapped back and companions removed within
//! `[hosted] max_mapped_body_bytes`, the body planned charged to the request-body budget before
//! it is written, and a mended `previous_response_id` put back (`request_body.rs` reads
//! the body; `crate::features::hosted` does the mapping itself).

use http::header;
use http::request::Parts;
use http::{HeaderName, HeaderValue};

use super::body_refusal::PrepareError;
use crate::config::Config;
use crate::core::dialect::request::set_previous_response_id;
use crate::features::hosted::id::Owner;
use crate::features::hosted::request::{Mapped, Turn, map_input, signed_ids};
use crate::features::hosted::shared::Pairs;
use crate::metrics::Metrics;
use crate::net::budget::{BodyBudget, Held, ReadError};

/// Azure OpenAI's credential field, made once (a `&str` name is parsed at every lookup).
static API_KEY: HeaderName = HeaderName::from_static("api-key");

/// The caller a request's pairs belong to: its credentials, digested with the hosted key.
pub fn owner(head: &Parts, config: &Config) -> Owner {
    let headers = &head.headers;
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    let api_key = headers.get(&API_KEY).map(HeaderValue::as_bytes);
    Owner::of(&config.hosted.key, authorization, api_key)
}

/// What mapping a body read whole needs.
#[derive(Clone, Copy)]
pub(super) struct Mapping<'a> {
    pub config: &'a Config,
    pub store: &'a Pairs,
    pub metrics: &'a Metrics,
    pub budget: &'a BodyBudget,
}

impl Mapping<'_> {
    /// The body read whole (`turn`) with its hosted items mapped back for `owner`, companions
    /// removed and `previous_response_id` mended (`None` when nothing changed). The new body is
    /// bounded by `[hosted] max_mapped_body_bytes` and charged to the body budget (into `held`)
    /// before it is written.
    pub(super) async fn map(
        &self,
        turn: Turn<'_>,
        owner: Owner,
        held: &mut Held,
        now: std::time::Instant,
    ) -> Result<Option<Vec<u8>>, PrepareError> {
        let Mapping {
            config,
            store,
            metrics,
            budget,
        } = *self;
        let key = &config.hosted.key;
        let found = store.lookup(&signed_ids(&turn, key), owner, now).await;
        let limit = config.hosted.max_mapped_body_bytes;
        let (planned, mapped) = map_input(&turn, key, &found, limit)?;
        let mut body = match planned {
            Some(planned) => {
                if !budget.take(planned.len(), planned.len(), held) {
                    return Err(ReadError::OverBudget.into());
                }
                Some(planned.into_bytes())
            }
            None => None,
        };
        let whole = turn.top.bytes();
        if let Some(shown) = turn.top.previous_response_id()
            && let Some(upstream) = store.response_id(&shown, owner, now).await
            && let Some(mended) =
                set_previous_response_id(body.as_deref().unwrap_or(whole), &upstream)
        {
            tracing::debug!(
                shown,
                upstream,
                "previous_response_id mapped to the gateway's own"
            );
            body = Some(mended);
        }
        for (mapping, n) in mapped.by_mapping() {
            metrics.hosted_mapped(mapping, n);
        }
        log_mapped(&mapped);
        Ok(body)
    }
}

fn log_mapped(mapped: &Mapped) {
    if mapped.from_content > 0 {
        tracing::info!(
            from_content = mapped.from_content,
            "hosted items the store did not have for this caller (expired, another caller's, \
             another deployment's): mapped from their own content"
        );
    }
    if mapped.any() {
        tracing::debug!(?mapped, "mapped the request's input for the gateway");
    }
}
