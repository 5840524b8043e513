//! A message body — a request's on the server's side, a response's on the client's — taken
//! apart as its [`Framing`] says, written after hyper 1's `proto/h1/decode.rs` and at least as
//! strict.
//!
//! The decoder copies nothing: each [`Step`] says how many of the caller's bytes it took and
//! which of them are body data, so the connection can hand the data on without a copy. Chunked
//! framing is a state machine over single bytes whose state lives in the decoder, so however
//! the bytes are split across reads, the data and the outcome are the same. Chunk extensions
//! and trailer fields are checked and counted against the limits below, then dropped.

use std::ops::Range;

use super::Framing;

/// Chunk extension bytes allowed in one body (the `;` not counted), reached means refused:
/// hyper's limit, counted as hyper counts, so that extensions cannot keep a stream busy
/// without data.
pub const MAX_CHUNK_EXTENSIONS: usize = 16 * 1024;

/// Trailer section bytes allowed in one body, from its first byte to its final CRLF, reached
/// means refused: hyper's limit, counted as hyper counts. The fields are dropped, but a
/// trailer section must still end.
pub const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// Trailer fields allowed in one body: hyper's (its default header count, 100).
pub const MAX_TRAILERS: usize = 100;

/// Decodes one message body; see [`Decoder::decode`].
#[derive(Debug, Clone)]
pub struct Decoder {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// This many body bytes still to come.
    Length(u64),
    /// Everything until the connection closes; `closed` once it has.
    Eof {
        closed: bool,
    },
    Chunked(Chunked),
    /// A decoding error, repeated by every later call: the bytes after it mean nothing.
    Failed(DecodeError),
}

/// The chunked decoder's position and its counts against the limits.
#[derive(Debug, Clone)]
struct Chunked {
    state: State,
    /// The current chunk's size while it is read, then its data bytes still to come.
    size: u64,
    extension_bytes: usize,
    trailer_bytes: usize,
    trailers: usize,
}

/// Where in the chunked framing the next byte falls (RFC 9112 §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The first hex digit of a chunk size.
    SizeStart,
    /// More hex digits, or what may follow them.
    Size,
    /// Whitespace after the size digits (hyper allows it): no more digits.
    SizeWhitespace,
    /// After `;`, up to the CR.
    Extension,
    /// The LF of the size line.
    SizeLf,
    /// Chunk data, `size` bytes of it still to come.
    Data,
    DataCr,
    DataLf,
    /// After the last chunk: a trailer field's first byte, or the final CR.
    TrailerStart,
    TrailerName,
    /// After the `:`, up to the CR.
    TrailerValue,
    TrailerLf,
    /// The final LF.
    EndLf,
    Done,
}

/// One call's work: the caller drops `buf[..consumed]` after passing on `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// How many bytes at the start of the buffer the decoder took.
    pub consumed: usize,
    /// Body data, a range within `buf[..consumed]`; never empty.
    pub data: Option<Range<usize>>,
}

/// Why a body is refused. The connection cannot be used further.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("the chunk size is over 2^64 - 1")]
    ChunkSizeOverflow,
    #[error("the chunk size line is not hex digits, extensions and CRLF")]
    InvalidChunkSize,
    #[error("the chunk extensions are over 16 KiB in one body")]
    ExtensionsTooLong,
    #[error("the chunk data is not followed by CRLF")]
    MissingCrlfAfterData,
    #[error("the trailer fields are over 16 KiB")]
    TrailersTooLong,
    #[error("the body has more than 100 trailer fields")]
    TooManyTrailers,
    #[error("the trailer section has a line that is not name: value CRLF")]
    InvalidTrailer,
    #[error("the trailer section has a line ending in a bare LF")]
    TrailerBareLf,
    #[error("the connection closed before the body's end")]
    BodyCut,
}

impl Decoder {
    pub fn new(framing: Framing) -> Decoder {
        let kind = match framing {
            Framing::Nothing => Kind::Length(0),
            Framing::Length(n) => Kind::Length(n),
            Framing::Close => Kind::Eof { closed: false },
            Framing::Chunked => Kind::Chunked(Chunked {
                state: State::SizeStart,
                size: 0,
                extension_bytes: 0,
                trailer_bytes: 0,
                trailers: 0,
            }),
        };
        Decoder { kind }
    }

    /// Decodes from the start of `buf` (the bytes read and not yet consumed). `consumed` is how
    /// many of them the decoder has taken; `data`, if any, is the range within
    /// `buf[..consumed]` that is body data (at most one range per call: e.g. the available
    /// part of the current chunk). consumed == 0 and data None and !is_done() → the caller
    /// must read more.
    pub fn decode(&mut self, buf: &[u8]) -> Result<Step, DecodeError> {
        let result = match &mut self.kind {
            Kind::Length(remaining) => Ok(take_length(remaining, buf)),
            Kind::Eof { closed: false } if !buf.is_empty() => Ok(Step {
                consumed: buf.len(),
                data: Some(0..buf.len()),
            }),
            Kind::Eof { .. } => Ok(Step {
                consumed: 0,
                data: None,
            }),
            Kind::Chunked(chunked) => chunked.decode(buf),
            Kind::Failed(e) => Err(*e),
        };
        if let Err(e) = result {
            self.kind = Kind::Failed(e);
        }
        result
    }

    /// The connection reached end of file: Ok when the body may end there (Close framing, or
    /// already done), else Err (the body was cut short).
    pub fn eof(&mut self) -> Result<(), DecodeError> {
        if let Kind::Eof { closed } = &mut self.kind {
            *closed = true;
        }
        if self.is_done() {
            return Ok(());
        }
        let error = match self.kind {
            Kind::Failed(e) => e,
            _ => DecodeError::BodyCut,
        };
        self.kind = Kind::Failed(error);
        Err(error)
    }

    /// The body's end has been decoded (Length reached, last chunk and trailers read).
    pub fn is_done(&self) -> bool {
        match &self.kind {
            Kind::Length(remaining) => *remaining == 0,
            Kind::Eof { closed } => *closed,
            Kind::Chunked(chunked) => chunked.state == State::Done,
            Kind::Failed(_) => false,
        }
    }
}

/// Up to `remaining` bytes of `buf` are data.
fn take_length(remaining: &mut u64, buf: &[u8]) -> Step {
    let take = usize::try_from(*remaining)
        .unwrap_or(usize::MAX)
        .min(buf.len());
    *remaining -= take as u64;
    Step {
        consumed: take,
        data: (take > 0).then_some(0..take),
    }
}

impl Chunked {
    /// Framing bytes one at a time, until chunk data (returned at once, as much as `buf`
    /// holds), the body's end, or the end of `buf`.
    fn decode(&mut self, buf: &[u8]) -> Result<Step, DecodeError> {
        let mut at = 0;
        while at < buf.len() {
            match self.state {
                State::Done => break,
                State::Data => {
                    let take = usize::try_from(self.size)
                        .unwrap_or(usize::MAX)
                        .min(buf.len() - at);
                    self.size -= take as u64;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok(Step {
                        consumed: at + take,
                        data: Some(at..at + take),
                    });
                }
                _ => {
                    self.state = self.next_state(buf[at])?;
                    at += 1;
                }
            }
        }
        Ok(Step {
            consumed: at,
            data: None,
        })
    }

    /// The state after `byte`, outside chunk data.
    fn next_state(&mut self, byte: u8) -> Result<State, DecodeError> {
        match self.state {
            State::SizeStart => {
                self.size = u64::from(hex_digit(byte).ok_or(DecodeError::InvalidChunkSize)?);
                Ok(State::Size)
            }
            State::Size => match hex_digit(byte) {
                Some(digit) => {
                    self.size = self
                        .size
                        .checked_mul(16)
                        .and_then(|size| size.checked_add(u64::from(digit)))
                        .ok_or(DecodeError::ChunkSizeOverflow)?;
                    Ok(State::Size)
                }
                None => after_size(byte),
            },
            State::SizeWhitespace => after_size(byte),
            State::Extension => self.extension(byte),
            State::SizeLf => match (byte, self.size) {
                (b'\n', 0) => Ok(State::TrailerStart),
                (b'\n', _) => Ok(State::Data),
                _ => Err(DecodeError::InvalidChunkSize),
            },
            State::DataCr => expect(
                byte,
                b'\r',
                State::DataLf,
                DecodeError::MissingCrlfAfterData,
            ),
            State::DataLf => expect(
                byte,
                b'\n',
                State::SizeStart,
                DecodeError::MissingCrlfAfterData,
            ),
            State::TrailerStart
            | State::TrailerName
            | State::TrailerValue
            | State::TrailerLf
            | State::EndLf => self.trailer(byte),
            // Neither reaches here: `decode` handles both before asking.
            State::Data | State::Done => Ok(self.state),
        }
    }

    /// Extensions are not used, only counted: they end at the CR, and a bare LF in them is
    /// refused (a peer that ends the line there would read the rest as the next chunk).
    fn extension(&mut self, byte: u8) -> Result<State, DecodeError> {
        match byte {
            b'\r' => Ok(State::SizeLf),
            b'\n' => Err(DecodeError::InvalidChunkSize),
            _ => {
                self.extension_bytes += 1;
                if self.extension_bytes >= MAX_CHUNK_EXTENSIONS {
                    return Err(DecodeError::ExtensionsTooLong);
                }
                Ok(State::Extension)
            }
        }
    }

    /// The trailer section: `name ":" value CRLF` lines, then CRLF. Every byte counts against
    /// [`MAX_TRAILER_BYTES`], every line against [`MAX_TRAILERS`].
    fn trailer(&mut self, byte: u8) -> Result<State, DecodeError> {
        self.trailer_bytes += 1;
        if self.trailer_bytes >= MAX_TRAILER_BYTES {
            return Err(DecodeError::TrailersTooLong);
        }
        match (self.state, byte) {
            (State::TrailerStart | State::TrailerName | State::TrailerValue, b'\n') => {
                Err(DecodeError::TrailerBareLf)
            }
            (State::TrailerStart, b'\r') => Ok(State::EndLf),
            (State::TrailerStart, _) if is_token(byte) => {
                self.trailers += 1;
                if self.trailers > MAX_TRAILERS {
                    return Err(DecodeError::TooManyTrailers);
                }
                Ok(State::TrailerName)
            }
            (State::TrailerName, b':') => Ok(State::TrailerValue),
            (State::TrailerName, _) if is_token(byte) => Ok(State::TrailerName),
            (State::TrailerValue, b'\r') => Ok(State::TrailerLf),
            (State::TrailerValue, _) if is_field_value(byte) => Ok(State::TrailerValue),
            (State::TrailerLf, b'\n') => Ok(State::TrailerStart),
            (State::EndLf, b'\n') => Ok(State::Done),
            _ => Err(DecodeError::InvalidTrailer),
        }
    }
}

/// After the size digits: whitespace (hyper's leniency), an extension, or the CR.
fn after_size(byte: u8) -> Result<State, DecodeError> {
    match byte {
        b' ' | b'\t' => Ok(State::SizeWhitespace),
        b';' => Ok(State::Extension),
        b'\r' => Ok(State::SizeLf),
        _ => Err(DecodeError::InvalidChunkSize),
    }
}

fn expect(byte: u8, wanted: u8, next: State, error: DecodeError) -> Result<State, DecodeError> {
    if byte == wanted { Ok(next) } else { Err(error) }
}

fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// RFC 9110 `tchar`, the bytes of a field name.
fn is_token(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// RFC 9110 field-value bytes: visible ASCII, space, tab, and obs-text (what `httparse` and
/// `http::HeaderValue` accept).
fn is_field_value(byte: u8) -> bool {
    matches!(byte, b'\t' | b' '..=0x7e | 0x80..=0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` one after another as a connection would (appending each to the bytes not
    /// yet consumed, decoding until the decoder wants more), then reports end of file unless
    /// the body ended first. Returns the data and the outcome.
    fn run(framing: Framing, pieces: &[&[u8]]) -> (Vec<u8>, Result<(), DecodeError>) {
        let mut decoder = Decoder::new(framing);
        let mut pending = Vec::new();
        let mut data = Vec::new();
        for piece in pieces {
            pending.extend_from_slice(piece);
            while !decoder.is_done() {
                let step = match decoder.decode(&pending) {
                    Ok(step) => step,
                    Err(e) => return (data, Err(e)),
                };
                assert!(step.consumed <= pending.len());
                if let Some(range) = step.data {
                    assert!(!range.is_empty() && range.end <= step.consumed);
                    data.extend_from_slice(&pending[range]);
                }
                pending.drain(..step.consumed);
                if step.consumed == 0 {
                    assert!(pending.is_empty(), "no progress on {pending:?}");
                    break;
                }
            }
            if decoder.is_done() {
                return (data, Ok(()));
            }
        }
        let end = decoder.eof();
        (data, end)
    }

    fn whole(framing: Framing, body: &[u8]) -> (Vec<u8>, Result<(), DecodeError>) {
        run(framing, &[body])
    }

    fn chunked(body: &[u8]) -> (Vec<u8>, Result<(), DecodeError>) {
        whole(Framing::Chunked, body)
    }

    #[test]
    fn length_takes_its_bytes_and_leaves_the_rest() {
        let mut decoder = Decoder::new(Framing::Length(5));
        let step = decoder.decode(b"hel").expect("data");
        assert_eq!(
            step,
            Step {
                consumed: 3,
                data: Some(0..3)
            }
        );
        assert!(!decoder.is_done());
        let step = decoder.decode(b"loHTTP/1.1").expect("data");
        assert_eq!(
            step,
            Step {
                consumed: 2,
                data: Some(0..2)
            }
        );
        assert!(decoder.is_done());
        assert_eq!(decoder.eof(), Ok(()));
    }

    #[test]
    fn length_zero_and_nothing_are_done_at_once() {
        for framing in [Framing::Length(0), Framing::Nothing] {
            let mut decoder = Decoder::new(framing);
            assert!(decoder.is_done());
            assert_eq!(
                decoder.decode(b"x"),
                Ok(Step {
                    consumed: 0,
                    data: None
                })
            );
        }
    }

    #[test]
    fn eof_framing_is_all_data_until_the_close() {
        let mut decoder = Decoder::new(Framing::Close);
        assert_eq!(
            decoder.decode(b"abc"),
            Ok(Step {
                consumed: 3,
                data: Some(0..3)
            })
        );
        assert_eq!(
            decoder.decode(b""),
            Ok(Step {
                consumed: 0,
                data: None
            })
        );
        assert!(!decoder.is_done());
        assert_eq!(decoder.eof(), Ok(()));
        assert!(decoder.is_done());
    }

    #[test]
    fn chunked_data_with_extensions_and_trailers_dropped() {
        let body =
            b"5;name=value;x\r\nhello\r\n6 \t;e\r\n world\r\n0\r\nExpires: never\r\nX-T:\r\n\r\n";
        assert_eq!(chunked(body), (b"hello world".to_vec(), Ok(())));
    }

    #[test]
    fn chunked_stops_at_its_end() {
        let mut decoder = Decoder::new(Framing::Chunked);
        let step = decoder.decode(b"0\r\n\r\nHTTP/1.1").expect("framing");
        assert_eq!(
            step,
            Step {
                consumed: 5,
                data: None
            }
        );
        assert!(decoder.is_done());
    }

    #[test]
    fn chunk_size_overflow_is_refused() {
        assert_eq!(
            chunked(b"10000000000000000\r\n").1,
            Err(DecodeError::ChunkSizeOverflow)
        );
        assert_eq!(
            chunked(b"fffffffffffffffff\r\n").1,
            Err(DecodeError::ChunkSizeOverflow)
        );
        // 2^64 - 1 is a size (the body is then cut short), and leading zeros do not overflow.
        assert_eq!(
            chunked(b"FFFFFFFFFFFFFFFF\r\nab").1,
            Err(DecodeError::BodyCut)
        );
        assert_eq!(
            chunked(b"00000000000000000001\r\na\r\n0\r\n\r\n"),
            (b"a".to_vec(), Ok(()))
        );
    }

    #[test]
    fn junk_chunk_sizes_are_refused() {
        for body in [
            &b"0x5\r\n"[..],
            b"g\r\n",
            b"\r\n",
            b" 5\r\n",
            b"5 5\r\n",
            b"-5\r\n",
            b"5\n",
            b"5\rx",
            b"5;a\nhello\r\n",
        ] {
            assert_eq!(
                chunked(body).1,
                Err(DecodeError::InvalidChunkSize),
                "{body:?}"
            );
        }
    }

    #[test]
    fn chunk_data_must_end_with_crlf() {
        for body in [&b"1\r\nab\r\n"[..], b"1\r\na\n0\r\n\r\n", b"1\r\na\rx"] {
            assert_eq!(
                chunked(body).1,
                Err(DecodeError::MissingCrlfAfterData),
                "{body:?}"
            );
        }
    }

    #[test]
    fn extensions_over_the_limit_are_refused() {
        let ext = |n: usize| format!("1;{}\r\na\r\n", "e".repeat(n));
        let just_under = format!("{}0\r\n\r\n", ext(MAX_CHUNK_EXTENSIONS - 1));
        assert_eq!(chunked(just_under.as_bytes()), (b"a".to_vec(), Ok(())));
        let over = format!("{}0\r\n\r\n", ext(MAX_CHUNK_EXTENSIONS));
        assert_eq!(
            chunked(over.as_bytes()).1,
            Err(DecodeError::ExtensionsTooLong)
        );
        // The limit is per body, not per chunk.
        let half = MAX_CHUNK_EXTENSIONS / 2;
        let spread = format!("{}{}0\r\n\r\n", ext(half), ext(half));
        assert_eq!(
            chunked(spread.as_bytes()).1,
            Err(DecodeError::ExtensionsTooLong)
        );
    }

    #[test]
    fn trailers_over_the_limits_are_refused() {
        let with_trailers = |fields: &str| format!("1\r\na\r\n0\r\n{fields}\r\n");
        // The section's bytes, final CRLF included, must stay under the limit.
        let fits = format!("X: {}\r\n", "v".repeat(MAX_TRAILER_BYTES - 8));
        assert_eq!(
            chunked(with_trailers(&fits).as_bytes()),
            (b"a".to_vec(), Ok(()))
        );
        let over = format!("X: {}\r\n", "v".repeat(MAX_TRAILER_BYTES - 7));
        assert_eq!(
            chunked(with_trailers(&over).as_bytes()).1,
            Err(DecodeError::TrailersTooLong)
        );
        let many = |n: usize| (0..n).map(|i| format!("T{i}: v\r\n")).collect::<String>();
        assert_eq!(
            chunked(with_trailers(&many(MAX_TRAILERS)).as_bytes()).1,
            Ok(())
        );
        assert_eq!(
            chunked(with_trailers(&many(MAX_TRAILERS + 1)).as_bytes()).1,
            Err(DecodeError::TooManyTrailers)
        );
    }

    #[test]
    fn invalid_trailers_are_refused() {
        for fields in [
            "X Y: 1\r\n",
            ": 1\r\n",
            " X: 1\r\n",
            "X\r\n",
            "X: \x01\r\n",
            "X: 1\rY",
        ] {
            let body = format!("0\r\n{fields}\r\n");
            assert_eq!(
                chunked(body.as_bytes()).1,
                Err(DecodeError::InvalidTrailer),
                "{fields:?}"
            );
        }
        assert_eq!(chunked(b"0\r\n\rx").1, Err(DecodeError::InvalidTrailer));
        for fields in ["X: 1\n", "\n", "X\n"] {
            let body = format!("0\r\n{fields}\r\n");
            assert_eq!(
                chunked(body.as_bytes()).1,
                Err(DecodeError::TrailerBareLf),
                "{fields:?}"
            );
        }
    }

    #[test]
    fn a_cut_body_is_refused() {
        assert_eq!(
            whole(Framing::Length(5), b"abc"),
            (b"abc".to_vec(), Err(DecodeError::BodyCut))
        );
        for body in [
            &b""[..],
            b"5",
            b"5\r\nab",
            b"5\r\nhello\r",
            b"0\r\n",
            b"0\r\nX: 1\r\n",
        ] {
            assert_eq!(chunked(body).1, Err(DecodeError::BodyCut), "{body:?}");
        }
    }

    #[test]
    fn an_error_is_final() {
        let mut decoder = Decoder::new(Framing::Chunked);
        assert_eq!(
            decoder.decode(b"5\r\nhel"),
            Ok(Step {
                consumed: 6,
                data: Some(3..6)
            })
        );
        assert_eq!(
            decoder.decode(b"lo\n"),
            Ok(Step {
                consumed: 2,
                data: Some(0..2)
            })
        );
        assert_eq!(
            decoder.decode(b"\n"),
            Err(DecodeError::MissingCrlfAfterData)
        );
        assert_eq!(
            decoder.decode(b"\r\n0\r\n\r\n"),
            Err(DecodeError::MissingCrlfAfterData)
        );
        assert_eq!(decoder.eof(), Err(DecodeError::MissingCrlfAfterData));
        assert!(!decoder.is_done());
    }

    /// Every body gives the same data and outcome cut in two at every position, and byte by
    /// byte, as whole.
    #[test]
    fn any_split_gives_the_same_data_and_outcome() {
        let long_ext = format!(
            "3;{}\r\nabc\r\n0\r\n\r\n",
            "x".repeat(MAX_CHUNK_EXTENSIONS - 1)
        );
        let cases: Vec<(Framing, &[u8])> = vec![
            (
                Framing::Chunked,
                b"5;a=b\r\nhello\r\n1 ;c=\"d\"\r\n \r\n10\r\n0123456789abcdef\r\n0;last\r\nX-T: 1\r\nY:\t2 \r\n\r\nnext",
            ),
            (Framing::Chunked, b"3\r\nabc\r\n0\r\nX: 1\n\r\n"),
            (Framing::Chunked, b"4\r\nabc"),
            (Framing::Chunked, long_ext.as_bytes()),
            (Framing::Length(11), b"hello world and more"),
            (Framing::Length(30), b"hello world"),
            (Framing::Close, b"all of it\r\n0\r\n\r\n"),
        ];
        for (framing, body) in cases {
            let expected = whole(framing, body);
            for at in 0..=body.len() {
                let (a, b) = body.split_at(at);
                assert_eq!(run(framing, &[a, b]), expected, "{framing:?} split at {at}");
            }
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            assert_eq!(run(framing, &bytes), expected, "{framing:?} byte by byte");
        }
    }
}
