//! Why a request body is not forwarded: what reading it and mapping its next turn back can
//! refuse, shared by the body's preparation and the next turn's mapping.

use crate::features::hosted::request;
use crate::net::budget::ReadError;

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
