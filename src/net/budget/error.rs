//! Why a body was not read, and the metric's reason for it.

use std::time::Duration;

use crate::metrics::BodyRefusal;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("could not read the request body: {0}")]
    Client(BoxError),
    #[error("the request body did not arrive within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("toolpulse holds as many request bodies as it may (body_buffer_bytes); retry shortly")]
    OverBudget,
    #[error(
        "toolpulse holds as many request bodies from this client's address as it may \
         (body_buffer_bytes_per_peer); retry once the others are answered"
    )]
    OverPeerShare,
    #[error(
        "toolpulse holds as many request bodies from this connection as it may \
         (body_buffer_bytes_per_connection); retry once the others are answered"
    )]
    OverConnectionShare,
}

impl ReadError {
    /// The `reason` label of `toolpulse_request_bodies_refused_total`.
    pub fn reason(&self) -> BodyRefusal {
        match self {
            ReadError::Client(_) => BodyRefusal::Unreadable,
            ReadError::Timeout(_) => BodyRefusal::Timeout,
            ReadError::OverBudget => BodyRefusal::Budget,
            ReadError::OverPeerShare => BodyRefusal::PeerShare,
            ReadError::OverConnectionShare => BodyRefusal::ConnectionShare,
        }
    }

    /// Whether the body was refused for want of room (503), not for itself.
    pub fn is_over_budget(&self) -> bool {
        matches!(
            self,
            ReadError::OverBudget | ReadError::OverPeerShare | ReadError::OverConnectionShare
        )
    }
}
