//! Reading a body whole, up to a limit, within its deadline and the budget: its buffer grows
//! as data arrives and every growth is charged before it is made, so a body holds about what
//! it received (at most twice that, and at least its first buffer), whatever it announced.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::error::ReadError;
use super::paced::Paced;
use super::shares::{BodyBudget, Held, Limit};
use crate::net::listen::ClientBody;

impl From<Limit> for ReadError {
    fn from(limit: Limit) -> Self {
        match limit {
            Limit::Budget => ReadError::OverBudget,
            Limit::Peer => ReadError::OverPeerShare,
            Limit::Connection => ReadError::OverConnectionShare,
        }
    }
}

/// A body read (up to a limit): its frames (the data in one, then trailers if any), the part
/// of the budget they hold, and the unread rest of a body over the limit.
pub struct Read {
    pub frames: VecDeque<Frame<Bytes>>,
    pub held: Held,
    pub rest: Option<Paced>,
}

/// The bytes of a body read whole ([`read_up_to`] puts them in one frame); `None` when it had
/// trailers.
pub fn whole(frames: &VecDeque<Frame<Bytes>>) -> Option<Bytes> {
    let mut frames = frames.iter();
    match (frames.next(), frames.next()) {
        (None, _) => Some(Bytes::new()),
        (Some(frame), None) => frame.data_ref().cloned(),
        _ => None,
    }
}

/// The first buffer of a body: enough for most requests whole, and all that a body that
/// announces more but has sent less than this holds.
pub const FIRST_BUFFER_BYTES: usize = 16 * 1024;

/// The buffer a body of `len` bytes so far, in a buffer of `capacity`, grows to for `needed`
/// bytes: doubling (from [`FIRST_BUFFER_BYTES`]), but never past what the body announced, nor
/// past `limit` unless `needed` is (the frame that goes over the limit is kept whole).
fn grown(capacity: usize, needed: usize, announced: Option<usize>, limit: usize) -> usize {
    let ceiling = announced.filter(|n| *n <= limit).unwrap_or(limit);
    let doubled = (2 * capacity).max(FIRST_BUFFER_BYTES).min(ceiling);
    needed.max(doubled)
}

/// Reads `body` to its end, or until more than `limit` bytes were read (then the unread rest
/// comes back too), within `timeout` and `budget`. The data is copied into one buffer of its
/// own as it arrives, and the budget is charged for that buffer's capacity, not the data's
/// length: a frame of hyper's keeps its whole read buffer alive, so holding frames would hold
/// more than they say.
pub async fn read_up_to(
    mut body: ClientBody,
    limit: usize,
    budget: &BodyBudget,
    timeout: Duration,
) -> Result<Read, ReadError> {
    let deadline = Instant::now() + timeout;
    let announced = body
        .size_hint()
        .exact()
        .and_then(|n| usize::try_from(n).ok());
    let mut held = Held::default();
    let mut data = BytesMut::new();
    let mut trailers = None;
    let mut rest = None;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(ReadError::Timeout(timeout)),
            Ok(None) => break,
            Ok(Some(frame)) => frame.map_err(ReadError::Client)?,
        };
        let chunk = match frame.into_data() {
            Ok(chunk) => chunk,
            Err(frame) => {
                trailers = Some(frame);
                continue;
            }
        };
        let needed = data.len() + chunk.len();
        if needed > data.capacity() {
            let target = grown(data.capacity(), needed, announced, limit);
            data = grow(data, target, budget, &mut held)?;
        }
        data.extend_from_slice(&chunk);
        if data.len() > limit {
            rest = Some(Paced::new(body, timeout));
            break;
        }
    }
    let mut frames = VecDeque::from([Frame::data(data.freeze())]);
    frames.extend(trailers);
    Ok(Read { frames, held, rest })
}

/// `data` moved to a buffer of `target` bytes, charged first; an exact allocation, as
/// `BytesMut::reserve` may double past what was charged.
fn grow(
    data: BytesMut,
    target: usize,
    budget: &BodyBudget,
    held: &mut Held,
) -> Result<BytesMut, ReadError> {
    budget.charge(target - data.capacity(), target, held)?;
    let mut bigger = BytesMut::with_capacity(target);
    // Whatever the allocator gave beyond the target is charged too.
    let extra = bigger.capacity().saturating_sub(target);
    if extra > 0 {
        budget.charge(extra, bigger.capacity(), held)?;
    }
    bigger.extend_from_slice(&data);
    Ok(bigger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_doubles_from_the_first_size_up_to_what_was_announced_or_the_limit() {
        let (k, limit) = (1024, 4 << 20);
        assert_eq!(
            grown(0, 1, Some(4 << 20), limit),
            16 * k,
            "one byte: the first"
        );
        assert_eq!(grown(0, 2, Some(2), limit), 2, "a small body: its length");
        assert_eq!(grown(16 * k, 16 * k + 1, None, limit), 32 * k);
        assert_eq!(grown(16 * k, 20 * k, Some(20 * k), limit), 20 * k);
        assert_eq!(grown(16 * k, 40 * k, None, limit), 40 * k, "a large frame");
        assert_eq!(
            grown(limit, limit + 10, None, limit),
            limit + 10,
            "past the limit"
        );
        assert_eq!(grown(3 << 20, (3 << 20) + 1, Some(8 << 20), limit), limit);
    }
}
