//! A response's bytes framed and not yet written (sans-IO): its head, then pieces — a chunk's
//! size line, its data, its CRLF, or the last chunk — queued as the body gives frames and
//! written together in one vectored write, as hyper's server queues them: a flood's frames go
//! out in as few writes as the socket takes, a paced stream's one frame in one write.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};
use http_body::Frame;

use super::response::{ChunkLine, Framing};

/// At most this many body frames wait to be written; the body is not polled for more.
pub const MAX_PIECES: usize = 16;
/// At most this many body bytes wait to be written; the body is not polled for more.
pub const MAX_QUEUED_BYTES: usize = 64 * 1024;
/// The most slices one write is given (three per piece, and the head).
pub const MAX_SLICES: usize = 3 * MAX_PIECES + 1;

#[derive(Default)]
pub struct Out {
    head: Bytes,
    pieces: VecDeque<Piece>,
    /// Data bytes in `pieces`.
    queued: usize,
}

struct Piece {
    line: Option<ChunkLine>,
    /// How much of `line` is written.
    line_sent: usize,
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
        self.pieces.push_back(Piece {
            line,
            line_sent: 0,
            data,
            tail,
        });
    }

    /// Fills `slices` with what is to be written next, in order; how many it filled.
    pub fn slices<'a>(&'a self, slices: &mut [IoSlice<'a>; MAX_SLICES]) -> usize {
        let mut n = 0;
        let mut add = |part: &'a [u8]| {
            if !part.is_empty() && n < MAX_SLICES {
                slices[n] = IoSlice::new(part);
                n += 1;
            }
        };
        add(&self.head);
        for piece in &self.pieces {
            if let Some(line) = &piece.line {
                add(&line.as_bytes()[piece.line_sent..]);
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
            if let Some(line) = &piece.line {
                let left = line.as_bytes().len() - piece.line_sent;
                let taken = n.min(left);
                piece.line_sent += taken;
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

/// Frames one body frame into `out`; a `Content-Length` body's excess is dropped.
pub fn take(frame: Frame<Bytes>, out: &mut Out, framing: Framing, remaining: &mut u64) {
    let Ok(mut data) = frame.into_data() else {
        // Trailers: the last chunk goes without them.
        return;
    };
    if data.is_empty() {
        return;
    }
    match framing {
        Framing::Chunked => out.push(Some(ChunkLine::new(data.len())), data, b"\r\n"),
        Framing::Length(_) => {
            let owed = usize::try_from(*remaining).unwrap_or(usize::MAX);
            if data.len() > owed {
                tracing::debug!("response body longer than its Content-Length: cut");
                data.truncate(owed);
            }
            *remaining -= data.len() as u64;
            if !data.is_empty() {
                out.push(None, data, b"");
            }
        }
        Framing::Close => out.push(None, data, b""),
        Framing::Nothing => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked(out: &mut Out, data: &'static str) {
        let line = ChunkLine::new(data.len());
        out.push(Some(line), Bytes::from_static(data.as_bytes()), b"\r\n");
    }

    fn pending(out: &Out) -> Vec<u8> {
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let n = out.slices(&mut slices);
        slices[..n].iter().flat_map(|s| s.to_vec()).collect()
    }

    #[test]
    fn written_in_any_steps_the_bytes_are_the_framing_in_order() {
        let whole = b"HTTP/1.1 200 OK\r\n\r\n3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n";
        for step in 1..=whole.len() {
            let mut out = Out::new(Bytes::from_static(b"HTTP/1.1 200 OK\r\n\r\n"));
            chunked(&mut out, "abc");
            chunked(&mut out, "d");
            out.push(None, Bytes::new(), b"0\r\n\r\n");
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
