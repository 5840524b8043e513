//! The rewriter's output, zero-copy where nothing changes: upstream bytes forwarded unchanged
//! go out as slices of the chunk being fed (adjacent ones as one slice); what toolpulse writes
//! (injected events, rewritten numbers, held events) goes into one reused buffer between them.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

#[derive(Debug, Default)]
pub struct Output {
    /// Output, in order: `segments`, then the open run of `origin` or `out` (never both).
    segments: Vec<Bytes>,
    /// The chunk being fed: upstream events forwarded unchanged go out as slices of it.
    origin: Bytes,
    /// The range of `origin` forwarded unchanged since the last other output.
    run: Option<Range<usize>>,
    /// Bytes toolpulse wrote.
    out: BytesMut,
}

impl Output {
    /// A chunk is being fed: unchanged bytes that lie in it go out as slices of it.
    ///
    /// The buffer toolpulse writes into is taken back from its start when what was written
    /// into it before has gone (the glue sent the last chunk's output and let it go), without
    /// allocating: grown past its end instead, it copied the chunk's writes so far each time
    /// (a stream that renumbers every event writes about a chunk's size per chunk).
    pub fn begin_chunk(&mut self, chunk: Bytes) {
        if self.out.is_empty() && self.out.capacity() > 0 {
            // `false` (it is still shared, or starts at its allocation's start): left as it is.
            let _ = self.out.try_reclaim(self.out.capacity() + 1);
        }
        self.origin = chunk;
    }

    /// The chunk is done: nothing holds it any more (call after [`Output::take`]).
    pub fn end_chunk(&mut self) {
        self.origin = Bytes::new();
    }

    /// The chunk being fed.
    pub fn origin(&self) -> &Bytes {
        &self.origin
    }

    /// Upstream bytes going out unchanged: a slice of the chunk being fed when they lie in it
    /// (adjacent ones make one slice), else copied.
    pub fn raw(&mut self, bytes: &Bytes) {
        if !self.in_origin(bytes) {
            return self.text().extend_from_slice(bytes);
        }
        let (origin, here) = (self.origin.as_ptr_range(), bytes.as_ptr_range());
        let (start, end) = (
            here.start as usize - origin.start as usize,
            here.end as usize - origin.start as usize,
        );
        match &mut self.run {
            Some(run) if run.end == start => run.end = end,
            _ => {
                self.end_run();
                if !self.out.is_empty() {
                    self.segments.push(self.out.split().freeze());
                }
                self.run = Some(start..end);
            }
        }
    }

    /// Whether `bytes` (not empty) lie in the chunk being fed.
    pub fn in_origin(&self, bytes: &Bytes) -> bool {
        let (origin, here) = (self.origin.as_ptr_range(), bytes.as_ptr_range());
        !bytes.is_empty() && origin.start <= here.start && here.end <= origin.end
    }

    /// Where `data` (not empty) starts in the chunk being fed, when it lies in it.
    pub fn offset_in_origin(&self, data: &[u8]) -> Option<usize> {
        let (origin, here) = (self.origin.as_ptr_range(), data.as_ptr_range());
        let inside = !data.is_empty() && origin.start <= here.start && here.end <= origin.end;
        inside.then(|| here.start as usize - origin.start as usize)
    }

    /// Where toolpulse writes: after the unchanged bytes so far.
    pub fn text(&mut self) -> &mut BytesMut {
        self.end_run();
        &mut self.out
    }

    fn end_run(&mut self) {
        if let Some(run) = self.run.take() {
            self.segments.push(self.origin.slice(run));
        }
    }

    /// The output so far, in order, appended to `pieces`; whether there was any. The list of
    /// segments keeps its capacity, so a stream's steady state allocates no list per chunk.
    /// One piece (a paced stream's chunk holds one event) goes out without the list, and a
    /// chunk that goes out whole goes out as itself, not as a slice that shares it (called last
    /// in a chunk).
    pub fn take_into(&mut self, pieces: &mut impl Extend<Bytes>) -> bool {
        if self.segments.is_empty() {
            // The open run or the written bytes, never both.
            let piece = match self.run.take() {
                Some(run) if run == (0..self.origin.len()) => std::mem::take(&mut self.origin),
                Some(run) => self.origin.slice(run),
                None if !self.out.is_empty() => self.out.split().freeze(),
                None => return false,
            };
            pieces.extend(Some(piece));
            return true;
        }
        self.end_run();
        if !self.out.is_empty() {
            self.segments.push(self.out.split().freeze());
        }
        let any = !self.segments.is_empty();
        pieces.extend(self.segments.drain(..));
        any
    }
}

/// `pieces` in one: the piece itself when there is one (no copy).
pub fn concat(mut pieces: Vec<Bytes>) -> Bytes {
    match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().unwrap_or_default(),
        _ => {
            let mut all = BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
            for piece in &pieces {
                all.extend_from_slice(piece);
            }
            all.freeze()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_bytes_are_slices_of_the_chunk_and_writes_go_between() {
        let chunk = Bytes::from_static(b"aaaabbbbcccc");
        let mut output = Output::default();
        output.begin_chunk(chunk.clone());
        output.raw(&chunk.slice(0..4));
        output.raw(&chunk.slice(4..8));
        output.text().extend_from_slice(b"XY");
        output.raw(&chunk.slice(8..12));
        output.raw(&Bytes::from_static(b"!"));
        let mut pieces = Vec::new();
        output.take_into(&mut pieces);
        output.end_chunk();
        assert_eq!(pieces.len(), 4, "{pieces:?}");
        assert_eq!(pieces[0].as_ptr(), chunk.as_ptr(), "a slice, not a copy");
        assert_eq!(concat(pieces), Bytes::from_static(b"aaaabbbbXYcccc!"));
        let mut rest = Vec::new();
        output.take_into(&mut rest);
        assert!(rest.is_empty());
    }

    #[test]
    fn a_chunk_that_goes_out_whole_goes_out_as_itself() {
        let chunk = Bytes::from_static(b"data: 1\n\ndata: 2\n\n");
        let mut output = Output::default();
        output.begin_chunk(chunk.clone());
        output.raw(&chunk.slice(0..9));
        output.raw(&chunk.slice(9..));
        let mut pieces = Vec::new();
        assert!(output.take_into(&mut pieces));
        output.end_chunk();
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0], chunk);
        assert_eq!(pieces[0].as_ptr(), chunk.as_ptr(), "the chunk, not a copy");
        // Part of it: a slice of it.
        output.begin_chunk(chunk.clone());
        output.raw(&chunk.slice(0..9));
        let mut part = Vec::new();
        assert!(output.take_into(&mut part));
        output.end_chunk();
        assert_eq!(part, [chunk.slice(0..9)]);
        assert!(!output.take_into(&mut part), "nothing more");
    }

    #[test]
    fn the_write_buffer_is_taken_back_once_its_output_has_gone() {
        let mut output = Output::default();
        let chunk = Bytes::from_static(b"x");
        output.begin_chunk(chunk.clone());
        output.text().reserve(4096);
        output.text().extend_from_slice(&[b'a'; 1000]);
        let mut pieces = Vec::new();
        output.take_into(&mut pieces);
        output.end_chunk();
        let start = pieces[0].as_ptr();
        // Still held: the next writes go after it, in the same allocation.
        output.begin_chunk(chunk.clone());
        output.text().extend_from_slice(b"b");
        assert_eq!(output.out.as_ptr(), start.wrapping_add(1000));
        output.take_into(&mut pieces);
        output.end_chunk();
        drop(pieces);
        // Gone: the next chunk writes from the start again, where there is room for it all.
        output.begin_chunk(chunk);
        assert_eq!(output.out.as_ptr(), start);
        assert_eq!(output.out.capacity(), 4096);
        output.text().extend_from_slice(&[b'c'; 1000]);
        assert_eq!(output.out.as_ptr(), start);
    }
}
