//! A message's bytes framed and not yet written, for either role: its head, then pieces — a
//! chunk's size line ([`ChunkLine`], on the stack), its data, its CRLF, or the last chunk —
//! queued as the body gives frames and written together in one vectored write, as hyper
//! queues them: a flood's frames go out in as few writes as the socket takes, a paced stream's
//! one frame in one write, and a chunk costs no allocation and no copy of its data.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};

/// What follows a chunk's data.
pub const CRLF: &[u8] = b"\r\n";
/// The end of a chunked body (no trailers).
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// At most this many body frames wait to be written; the body is not polled for more.
pub const MAX_PIECES: usize = 16;
/// At most this many body bytes wait to be written; the body is not polled for more.
pub const MAX_QUEUED_BYTES: usize = 64 * 1024;
/// The most slices one write is given (three per piece, and the head).
pub const MAX_SLICES: usize = 3 * MAX_PIECES + 1;

/// A chunk's size line: the size in hex, CRLF, written into a buffer of its own rather than
/// formatted into an allocation.
#[derive(Debug, Clone)]
pub struct ChunkLine {
    bytes: [u8; 18],
    /// Where the unwritten part starts.
    start: usize,
}

impl ChunkLine {
    pub fn new(size: usize) -> ChunkLine {
        let mut bytes = [0u8; 18];
        bytes[16] = b'\r';
        bytes[17] = b'\n';
        let mut start = 16;
        let mut n = size;
        loop {
            start -= 1;
            bytes[start] = b"0123456789abcdef"[n & 0xf];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        ChunkLine { bytes, start }
    }

    /// What is left to write of it.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    /// Drops its first `n` bytes (at most all of them), as written.
    pub fn advance(&mut self, n: usize) {
        self.start = (self.start + n).min(self.bytes.len());
    }
}

/// A message's framed bytes not yet written: its head, then its body's pieces.
#[derive(Default)]
pub struct Out {
    head: Bytes,
    pieces: VecDeque<Piece>,
    /// Data bytes in `pieces`.
    queued: usize,
}

struct Piece {
    line: Option<ChunkLine>,
    data: Bytes,
    tail: &'static [u8],
}

impl Out {
    pub fn new(head: Bytes) -> Out {
        Out {
            head,
            ..Out::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.pieces.is_empty()
    }

    /// Whether another body frame may be queued.
    pub fn has_room(&self) -> bool {
        self.pieces.len() < MAX_PIECES && self.queued < MAX_QUEUED_BYTES
    }

    /// Queues a piece: an optional size line, data, then `tail` (a CRLF, or the last chunk).
    pub fn push(&mut self, line: Option<ChunkLine>, data: Bytes, tail: &'static [u8]) {
        self.queued += data.len();
        self.pieces.push_back(Piece { line, data, tail });
    }

    /// Queues `data` as one chunk: its size line, the data, CRLF.
    pub fn push_chunk(&mut self, data: Bytes) {
        self.push(Some(ChunkLine::new(data.len())), data, CRLF);
    }

    /// Pieces queued (each up to three slices: a size line, its data, its tail).
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// Fills `slices` with what is to be written next, in order, as much as fits; how many it
    /// filled. [`MAX_SLICES`] take all there can be.
    pub fn slices<'a, const N: usize>(&'a self, slices: &mut [IoSlice<'a>; N]) -> usize {
        let mut n = 0;
        let mut add = |part: &'a [u8]| {
            if !part.is_empty() && n < N {
                slices[n] = IoSlice::new(part);
                n += 1;
            }
        };
        add(&self.head);
        for piece in &self.pieces {
            if let Some(line) = &piece.line {
                add(line.as_bytes());
            }
            add(&piece.data);
            add(piece.tail);
        }
        n
    }

    /// Drops the first `n` bytes, as written.
    pub fn advance(&mut self, mut n: usize) {
        let head = n.min(self.head.len());
        self.head.advance(head);
        n -= head;
        while n > 0 {
            let Some(piece) = self.pieces.front_mut() else {
                break;
            };
            if let Some(line) = &mut piece.line {
                let left = line.as_bytes().len();
                let taken = n.min(left);
                line.advance(taken);
                n -= taken;
                if taken < left {
                    break;
                }
                piece.line = None;
            }
            let data = n.min(piece.data.len());
            piece.data.advance(data);
            self.queued -= data;
            n -= data;
            let tail = n.min(piece.tail.len());
            piece.tail = &piece.tail[tail..];
            n -= tail;
            if piece.line.is_none() && piece.data.is_empty() && piece.tail.is_empty() {
                self.pieces.pop_front();
            }
        }
        if self.pieces.is_empty() && self.pieces.capacity() > 4 {
            // A flood's queue is given back once it is written.
            self.pieces = VecDeque::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked(out: &mut Out, data: &'static str) {
        out.push_chunk(Bytes::from_static(data.as_bytes()));
    }

    fn pending(out: &Out) -> Vec<u8> {
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let n = out.slices(&mut slices);
        slices[..n].iter().flat_map(|s| s.to_vec()).collect()
    }

    #[test]
    fn chunk_lines_are_hex() {
        assert_eq!(ChunkLine::new(0).as_bytes(), b"0\r\n");
        assert_eq!(ChunkLine::new(255).as_bytes(), b"ff\r\n");
        assert_eq!(ChunkLine::new(65536).as_bytes(), b"10000\r\n");
        let max = format!("{:x}\r\n", usize::MAX);
        assert_eq!(ChunkLine::new(usize::MAX).as_bytes(), max.as_bytes());
        let mut line = ChunkLine::new(0x1f);
        line.advance(1);
        assert_eq!(line.as_bytes(), b"f\r\n");
        line.advance(10);
        assert_eq!(line.as_bytes(), b"");
    }

    #[test]
    fn written_in_any_steps_the_bytes_are_the_framing_in_order() {
        let whole = b"HTTP/1.1 200 OK\r\n\r\n3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n";
        for step in 1..=whole.len() {
            let mut out = Out::new(Bytes::from_static(b"HTTP/1.1 200 OK\r\n\r\n"));
            chunked(&mut out, "abc");
            chunked(&mut out, "d");
            out.push(None, Bytes::new(), LAST_CHUNK);
            assert_eq!(pending(&out), whole);
            let mut written = Vec::new();
            while !out.is_empty() {
                let next = pending(&out);
                let n = step.min(next.len());
                written.extend_from_slice(&next[..n]);
                out.advance(n);
            }
            assert_eq!(written, whole, "in steps of {step}");
            assert_eq!(out.queued, 0);
        }
    }

    /// Fewer slices than the queue holds: the first of it, in order, and the rest after.
    #[test]
    fn a_small_array_of_slices_takes_what_fits() {
        let mut out = Out::new(Bytes::from_static(b"H\r\n\r\n"));
        chunked(&mut out, "abc");
        chunked(&mut out, "d");
        let mut slices = [IoSlice::new(&[]); 4];
        let n = out.slices(&mut slices);
        let first: Vec<u8> = slices[..n].iter().flat_map(|s| s.to_vec()).collect();
        assert_eq!((n, &first[..]), (4, &b"H\r\n\r\n3\r\nabc\r\n"[..]));
        out.advance(first.len());
        assert_eq!(out.pieces(), 1);
        assert_eq!(pending(&out), b"1\r\nd\r\n");
    }

    #[test]
    fn room_is_bounded_by_pieces_and_bytes() {
        let mut out = Out::default();
        for _ in 0..MAX_PIECES {
            assert!(out.has_room());
            chunked(&mut out, "x");
        }
        assert!(!out.has_room(), "pieces");
        out.advance(pending(&out).len());
        assert!(out.is_empty() && out.has_room());
        out.push(None, Bytes::from(vec![0; MAX_QUEUED_BYTES]), b"");
        assert!(!out.has_room(), "bytes");
    }
}
