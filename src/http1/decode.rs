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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

    /// Takes the framing at the start of `buf` up to the next body data (none for a body that
    /// is not chunked): how many bytes. Lets a reader see that a read holds nothing after its
    /// data but framing. An error is kept, as [`Decoder::decode`] keeps it.
    pub fn framing(&mut self, buf: &[u8]) -> Result<usize, DecodeError> {
        let result = match &mut self.kind {
            Kind::Chunked(chunked) => chunked.framing(buf),
            Kind::Failed(e) => Err(*e),
            _ => Ok(0),
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
    /// Framing up to chunk data (returned at once, as much as `buf` holds), the body's end, or
    /// the end of `buf`.
    fn decode(&mut self, buf: &[u8]) -> Result<Step, DecodeError> {
        let at = self.framing(buf)?;
        if self.state != State::Data || at == buf.len() {
            return Ok(Step {
                consumed: at,
                data: None,
            });
        }
        let take = usize::try_from(self.size)
            .unwrap_or(usize::MAX)
            .min(buf.len() - at);
        self.size -= take as u64;
        if self.size == 0 {
            self.state = State::DataCr;
        }
        Ok(Step {
            consumed: at + take,
            data: Some(at..at + take),
        })
    }

    /// Takes framing bytes, one at a time, up to chunk data, the body's end or the end of
    /// `buf`; how many it took.
    fn framing(&mut self, buf: &[u8]) -> Result<usize, DecodeError> {
        let mut at = 0;
        while at < buf.len() {
            match self.state {
                State::Data | State::Done => break,
                // The usual framing between two chunks, `CRLF size CRLF`, taken whole; the
                // same states as byte by byte, which handles everything else.
                State::DataCr if buf[at..].starts_with(b"\r\n") => {
                    self.state = State::SizeStart;
                    at += 2;
                }
                State::SizeStart if let Some((size, len)) = plain_size_line(&buf[at..]) => {
                    self.size = size;
                    self.state = if size == 0 {
                        State::TrailerStart
                    } else {
                        State::Data
                    };
                    at += len;
                }
                _ => {
                    self.state = self.next_state(buf[at])?;
                    at += 1;
                }
            }
        }
        Ok(at)
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

/// A size line of hex digits and CRLF, no extension, no whitespace, at most 16 digits (so
/// the size fits): `(size, the line's length)`. `None` sends the bytes through the byte by byte
/// states, which take every other form and refuse what is wrong.
fn plain_size_line(buf: &[u8]) -> Option<(u64, usize)> {
    let mut size = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(17) {
        match hex_digit(byte) {
            Some(digit) if i < 16 => size = size << 4 | u64::from(digit),
            None if i > 0 && buf[i..].starts_with(b"\r\n") => return Some((size, i + 2)),
            _ => return None,
        }
    }
    None
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
mod tests;
