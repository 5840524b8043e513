//! Why a next turn's body is not forwarded: its hosted items cannot be mapped back to the
//! gateway's (too large once mapped, gone, another caller's, not signed here, ambiguous). The
//! client is told in OpenAI's error shape (400), naming the item and the reason; the gateway
//! gets nothing. Each reason is one of a few fixed metric labels.

use super::store::Gone;
use crate::core::dialect::request::TooLarge;
use crate::metrics::HostedRefusal;

/// Why a hosted item of the input has no pair to stand for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmapped {
    Gone(Gone),
    /// Its id was not made with this deployment's key.
    Unverified,
}

impl Unmapped {
    /// The `reason` label of `toolpulse_hosted_refusals_total`.
    pub fn reason(self) -> HostedRefusal {
        match self {
            Unmapped::Gone(gone) => gone.reason(),
            Unmapped::Unverified => HostedRefusal::Unverified,
        }
    }

    fn says(self) -> &'static str {
        match self {
            Unmapped::Gone(Gone::Expired) => {
                "it expired (toolpulse keeps the gateway's calls behind its items for [hosted] ttl_ms)"
            }
            Unmapped::Gone(Gone::Evicted) => {
                "it was evicted to make room in toolpulse's store (its bounds, or the share one \
                 caller or one response may hold)"
            }
            Unmapped::Gone(Gone::AnotherCaller) => {
                "it was made for a request with other credentials (Authorization or api-key)"
            }
            Unmapped::Gone(Gone::NotKept) => {
                "toolpulse no longer keeps it (it expired or was evicted)"
            }
            Unmapped::Unverified => {
                "its id was not made with this deployment's [hosted] key (made before the key \
                 changed, or forged)"
            }
        }
    }
}

/// Why a body is not forwarded: the client is told (400), the gateway gets nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the request's input, with the items toolpulse made mapped back to the gateway's own (an \
         item_reference becomes the whole tool call and its output), would be over {limit} bytes \
         ([hosted] max_mapped_body_bytes): send fewer references, or start from a fresh history"
    )]
    TooLarge { limit: usize },
    #[error(
        "input item {id} ({kind}) cannot be mapped back to the gateway's tool call: {}. Send the \
         full items instead (the response's output as it was), or start from a fresh history",
        .why.says()
    )]
    Unavailable {
        id: String,
        kind: String,
        why: Unmapped,
    },
    #[error(
        "the request body holds items toolpulse made but is not a JSON object it can read, so \
         they cannot be mapped back to the gateway's: send the body as JSON"
    )]
    Unreadable,
    #[error(
        "the request body names {what} more than once and holds items toolpulse made: readers \
         disagree on which one counts, so it is not mapped; send each key once"
    )]
    Ambiguous { what: String },
}

impl Refusal {
    /// The error's `code`.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::TooLarge { .. } => "mapped_body_too_large",
            Refusal::Unavailable { .. } => "hosted_item_unavailable",
            Refusal::Ambiguous { .. } => "ambiguous_request_body",
            Refusal::Unreadable => "hosted_items_unmappable",
        }
    }

    /// The `reason` label of `toolpulse_hosted_refusals_total`.
    pub fn reason(&self) -> HostedRefusal {
        match self {
            Refusal::TooLarge { .. } => HostedRefusal::TooLarge,
            Refusal::Unavailable { why, .. } => why.reason(),
            Refusal::Ambiguous { .. } => HostedRefusal::Ambiguous,
            Refusal::Unreadable => HostedRefusal::Unreadable,
        }
    }
}

impl From<TooLarge> for Refusal {
    fn from(e: TooLarge) -> Self {
        Refusal::TooLarge { limit: e.limit }
    }
}
