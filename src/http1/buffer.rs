//! How much a client connection's next read asks for (the upstream side reads into a scratch
//! buffer of [`READ_BUF_MAX`] and copies out what it got): a read buffer starts at
//! [`READ_BUF_FIRST`], doubles while reads fill it, up to [`READ_BUF_MAX`], and halves again
//! after reads that use less than half of it, down to [`READ_BUF_MIN`].

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

#[cfg(test)]
mod tests {
    use super::{READ_BUF_FIRST, READ_BUF_MAX, READ_BUF_MIN, next_read_size};

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
