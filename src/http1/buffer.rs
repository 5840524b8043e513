//! How much a client connection's next read asks for (the upstream side reads into a scratch
//! buffer of [`READ_BUF_MAX`] and copies out what it got): a read buffer starts at
//! [`READ_BUF_FIRST`], doubles while reads fill it, up to [`READ_BUF_MAX`], and halves again
//! after reads that use less than half of it, down to [`READ_BUF_MIN`]. And how what a read got
//! is copied out without an allocation per event ([`copy_out`]).

use bytes::{Bytes, BytesMut};

/// The read buffer's first size: a paced stream's events are a few hundred bytes, and every
/// open stream holds one buffer, so one that never fills it stays this small.
pub const READ_BUF_FIRST: usize = 2 * 1024;
/// The least a read buffer that once filled shrinks back to. Lower, a flood's reads (whatever
/// the socket holds, often less than half the buffer with many streams on one CPU) shrink it
/// again and again: with 2 KiB, a flood cost 1.11–1.21× nginx's CPU per event against
/// 0.77–1.10× with 4 KiB (`bench/run.sh`, flood phase, alternating runs).
pub const READ_BUF_MIN: usize = 4 * 1024;
/// The most one read takes (hyper's default grows to ~400 KiB): a flooding stream then holds at
/// most this much in one read, and the rewriter's output follows suit.
pub const READ_BUF_MAX: usize = 64 * 1024;

/// The size of the next read after one of `read` bytes into `size`: doubled after a full read,
/// halved after one that used less than half, within [`READ_BUF_MIN`] (once above it) and
/// [`READ_BUF_MAX`].
pub fn next_read_size(size: usize, read: usize) -> usize {
    if read >= size {
        (size * 2).min(READ_BUF_MAX)
    } else if read < size / 2 && size > READ_BUF_MIN {
        (size / 2).max(READ_BUF_MIN)
    } else {
        size
    }
}

/// Data up to this size is copied into a connection's reused allocation ([`copy_out`]); larger
/// data gets an allocation of its own. So a waiting stream holds at most about twice this (a
/// text delta's event is ~150–300 bytes).
pub const REUSED_MAX: usize = 1024;

/// `data` as `Bytes` of its own: copied into `copies`' allocation when it is small, which
/// `BytesMut::reserve` takes back once the copy before has been dropped (so a paced stream's
/// events, each sent before the next arrives, cost no allocation; a copy's clones share it),
/// and into a new allocation while that copy is still held, or when `data` is large.
pub fn copy_out(data: &[u8], copies: &mut BytesMut) -> Bytes {
    if data.len() > REUSED_MAX {
        return Bytes::copy_from_slice(data);
    }
    if copies.capacity() < data.len() {
        copies.reserve(data.len());
        if copies.capacity() > REUSED_MAX {
            // Grown past the bound (an allocation still shared gives a doubled one): start
            // over at this size.
            *copies = BytesMut::with_capacity(data.len());
        }
    }
    copies.extend_from_slice(data);
    copies.split().freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy goes into the allocation of the copy before once that one is dropped, into a new
    /// one while it is held (and that copy stays intact); large data gets its own, and what the
    /// connection keeps stays bounded.
    #[test]
    fn copies_reuse_the_last_ones_allocation_once_it_is_dropped() {
        let mut copies = BytesMut::new();
        let first = copy_out(&[b'a'; 200], &mut copies);
        let at = first.as_ptr();
        drop(first);
        let second = copy_out(&[b'b'; 150], &mut copies);
        assert_eq!(second.as_ptr(), at, "the same allocation, taken back");
        let held = second.clone();
        let third = copy_out(&[b'c'; 180], &mut copies);
        assert_ne!(
            third.as_ptr(),
            at,
            "the last copy is held: a new allocation"
        );
        assert_eq!(&held[..], &[b'b'; 150][..], "the held copy is intact");
        assert_eq!(&third[..], &[b'c'; 180][..]);
        drop((held, second, third));

        let large = copy_out(&[b'd'; REUSED_MAX + 1], &mut copies);
        assert_eq!(large.len(), REUSED_MAX + 1);
        for n in (1..=REUSED_MAX).step_by(97) {
            let copy = copy_out(&vec![b'e'; n], &mut copies);
            assert_eq!(&copy[..], &vec![b'e'; n][..]);
            assert!(
                copies.capacity() <= REUSED_MAX,
                "bounded: {}",
                copies.capacity()
            );
        }
    }

    #[test]
    fn reads_grow_when_full_and_shrink_no_lower_than_the_floor_once_grown() {
        // A paced stream's small reads keep the first, smaller size.
        assert_eq!(next_read_size(READ_BUF_FIRST, 200), READ_BUF_FIRST);
        assert_eq!(
            next_read_size(READ_BUF_FIRST, READ_BUF_FIRST),
            2 * READ_BUF_FIRST
        );
        assert_eq!(next_read_size(16 * 1024, 1000), 8 * 1024);
        assert_eq!(
            next_read_size(READ_BUF_MIN, 10),
            READ_BUF_MIN,
            "the floor, once grown"
        );
        assert_eq!(next_read_size(READ_BUF_MAX, READ_BUF_MAX), READ_BUF_MAX);
        assert_eq!(
            next_read_size(8 * 1024, 5000),
            8 * 1024,
            "more than half used"
        );
    }
}
