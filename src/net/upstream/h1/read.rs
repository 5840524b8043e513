//! Reading an upstream connection. A read goes into the thread's scratch buffer (64 KiB,
//! `http1::buffer::READ_BUF_MAX`, the most one read takes) and what it got is copied out at its
//! size: an open stream waiting for its next event holds no read buffer (a buffer per stream
//! would be 2 KiB of every one when 10,000 are open) and an event on its way to the client holds
//! its own size. A response body's small read is decoded where it lies in the scratch buffer,
//! and its data copied out into the connection's own small allocation, reused once the event
//! before was written: a paced event costs no allocation. After a read of more than
//! [`COPY_MAX`] (a flood), reads go straight into the connection's buffer instead, uncopied,
//! until one is small again.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, ReadBuf};

use super::io::Io;
use crate::http1::buffer::{READ_BUF_MAX, copy_out};
use crate::http1::decode::Decoder;

/// Reads up to this size are copied out of the scratch buffer; a larger one sends the next
/// read straight into the connection's buffer.
pub(super) const COPY_MAX: usize = 4 * 1024;

thread_local! {
    /// Where upstream connections on this thread read into (the largest read), before what was
    /// read is copied out.
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUF_MAX].into_boxed_slice());
}

/// What one read for a response body gave.
pub(super) enum BodyRead {
    /// The upstream closed the connection.
    Closed,
    /// Body data, a copy of the read's at its size; what followed it in the read, other than
    /// framing, is in the connection's buffer.
    Data(Bytes),
    /// What was read is in the connection's buffer, for the decoder to take from there.
    Buffered,
}

/// What was read from a connection and not yet taken, and where the next read goes.
#[derive(Default)]
pub(super) struct Reads {
    pub(super) buf: BytesMut,
    /// Where body data is copied out to ([`copy_out`]): once the client has been sent the last
    /// copy, the next goes into the same allocation.
    copies: BytesMut,
    /// The last read was larger than [`COPY_MAX`]: the next one goes straight into `buf`.
    flooding: bool,
}

impl Reads {
    /// Reads once into `buf` (the response head's reads); the number of bytes read (0 at end of
    /// file).
    pub(super) fn poll_fill(
        &mut self,
        io: Pin<&mut Io>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let before = self.buf.len();
        Poll::Ready(Ok(match ready!(self.poll_read(io, None, cx))? {
            BodyRead::Closed => 0,
            _ => self.buf.len() - before,
        }))
    }

    /// Reads once for a body `decoder` takes apart. A small read into an empty buffer is
    /// decoded in the scratch buffer: its first data copied out as one `Bytes` of its size,
    /// its framing taken without a copy. Anything else goes through `buf`.
    pub(super) fn poll_body_read(
        &mut self,
        io: Pin<&mut Io>,
        decoder: &mut Decoder,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<BodyRead>> {
        self.poll_read(io, Some(decoder), cx)
    }

    /// One read: straight into `buf` while flooding, else into the scratch buffer, decoded
    /// there when a `decoder` is given and nothing waits in `buf`, copied into `buf` otherwise.
    fn poll_read(
        &mut self,
        io: Pin<&mut Io>,
        decoder: Option<&mut Decoder>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<BodyRead>> {
        if self.buf.is_empty() {
            // Let go of the share of the last buffer the event handed on still holds.
            self.buf = BytesMut::new();
        }
        let Reads {
            buf,
            copies,
            flooding,
        } = self;
        if *flooding {
            if buf.capacity() - buf.len() < READ_BUF_MAX {
                buf.reserve(READ_BUF_MAX);
            }
            let n = ready!(tokio_util::io::poll_read_buf(io, cx, buf))?;
            *flooding = n > COPY_MAX;
            return Poll::Ready(Ok(if n == 0 {
                BodyRead::Closed
            } else {
                BodyRead::Buffered
            }));
        }
        SCRATCH.with_borrow_mut(|scratch| {
            let mut read = ReadBuf::new(scratch);
            ready!(io.poll_read(cx, &mut read))?;
            let filled = read.filled();
            *flooding = filled.len() > COPY_MAX;
            Poll::Ready(Ok(match decoder {
                _ if filled.is_empty() => BodyRead::Closed,
                Some(decoder) if !*flooding && buf.is_empty() => {
                    decode_read(filled, decoder, buf, copies)
                }
                _ => {
                    buf.extend_from_slice(filled);
                    BodyRead::Buffered
                }
            }))
        })
    }
}

/// Takes `read`'s first body data (a copy, out of `copies`) and the framing after it; keeps the
/// rest in `buf`.
fn decode_read(
    read: &[u8],
    decoder: &mut Decoder,
    buf: &mut BytesMut,
    copies: &mut BytesMut,
) -> BodyRead {
    // A decoding error stays in the decoder, which gives it again when `buf` is decoded: the
    // bytes are kept there, so that it is.
    let Ok(step) = decoder.decode(read) else {
        buf.extend_from_slice(read);
        return BodyRead::Buffered;
    };
    let mut end = step.consumed;
    if step.data.is_some() {
        // An error here is given after this data has gone on (the bytes from where the framing
        // went wrong are kept).
        end += decoder.framing(&read[end..]).unwrap_or(0);
    }
    // Bytes after the body's end, or a second chunk's: kept in order.
    buf.extend_from_slice(&read[end..]);
    match step.data {
        Some(data) => BodyRead::Data(copy_out(&read[data], copies)),
        None => BodyRead::Buffered,
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::http1::Framing;

    /// A connection's two ends: what toolpulse reads (its `Reads`, empty), and the upstream.
    struct Conn {
        io: Io,
        reads: Reads,
    }

    async fn connected() -> (Conn, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (upstream, _) = accepted.expect("accept");
        let io = Io::Plain(client.expect("connect"));
        let reads = Reads::default();
        (Conn { io, reads }, upstream)
    }

    /// A read is copied out at its size, and a stream waiting for its next event holds no read
    /// buffer; a read over [`COPY_MAX`] sends the next one straight into the stream's buffer.
    /// Each read waits for the bytes to be readable (an event), never for a clock.
    #[tokio::test]
    async fn a_waiting_stream_holds_no_read_buffer() {
        let (mut conn, mut upstream) = connected().await;
        let fill = async |conn: &mut Conn| {
            std::future::poll_fn(|cx| conn.reads.poll_fill(Pin::new(&mut conn.io), cx))
                .await
                .expect("read")
        };

        upstream.write_all(&[b'e'; 300]).await.expect("write");
        assert_eq!(fill(&mut conn).await, 300);
        assert_eq!(
            (conn.reads.buf.len(), conn.reads.buf.capacity()),
            (300, 300),
            "its size"
        );
        let event = conn.reads.buf.split_to(300).freeze();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(
            conn.reads
                .poll_fill(Pin::new(&mut conn.io), &mut cx)
                .is_pending(),
            "nothing more yet"
        );
        assert_eq!(conn.reads.buf.capacity(), 0, "no buffer while waiting");
        drop(event);

        let flood = vec![b'f'; 3 * COPY_MAX];
        upstream.write_all(&flood).await.expect("write");
        let mut read = 0;
        while read < flood.len() {
            read += fill(&mut conn).await;
        }
        assert!(conn.reads.flooding, "a read over COPY_MAX was seen");
        conn.reads.buf.clear();
        upstream.write_all(b"x").await.expect("write");
        assert_eq!(fill(&mut conn).await, 1);
        assert!(
            conn.reads.buf.capacity() >= READ_BUF_MAX,
            "read straight into the stream's buffer"
        );
        assert!(
            !conn.reads.flooding,
            "a small read: back to the scratch buffer"
        );
    }

    /// A paced chunk is handed on as its data alone, in a `Bytes` of its own, and nothing stays
    /// behind; what follows a first chunk's data and framing in the same read stays, in order, for the
    /// decoder.
    #[tokio::test]
    async fn a_small_read_is_decoded_where_it_lies() {
        let (mut conn, mut upstream) = connected().await;
        let mut decoder = Decoder::new(Framing::Chunked);
        let read = async |conn: &mut Conn, decoder: &mut Decoder| {
            std::future::poll_fn(|cx| {
                conn.reads
                    .poll_body_read(Pin::new(&mut conn.io), decoder, cx)
            })
            .await
            .expect("read")
        };

        upstream.write_all(b"5\r\nhello\r\n").await.expect("write");
        let BodyRead::Data(data) = read(&mut conn, &mut decoder).await else {
            panic!("data")
        };
        assert_eq!(&data[..], b"hello");
        assert_eq!(
            conn.reads.buf.capacity(),
            0,
            "the framing was taken, nothing kept"
        );

        upstream
            .write_all(b"2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n")
            .await
            .expect("write");
        let BodyRead::Data(data) = read(&mut conn, &mut decoder).await else {
            panic!("data")
        };
        assert_eq!(&data[..], b"ab");
        assert_eq!(
            &conn.reads.buf[..],
            b"cde\r\n0\r\n\r\n",
            "the rest in order, after the framing the decoder took"
        );
        let step = decoder.decode(&conn.reads.buf).expect("decode");
        assert_eq!(&conn.reads.buf[step.data.expect("data")], b"cde");
        assert_eq!(decoder.framing(&conn.reads.buf[step.consumed..]), Ok(7));
        assert!(decoder.is_done());
    }

    /// Framing that goes wrong after a chunk's data, in the same read: the data goes on, then
    /// the error is given, from the bytes kept for it.
    #[tokio::test]
    async fn an_error_after_the_data_comes_after_it() {
        let (mut conn, mut upstream) = connected().await;
        let mut decoder = Decoder::new(Framing::Chunked);
        upstream
            .write_all(b"5\r\nhello\r\nZZ")
            .await
            .expect("write");
        let read = std::future::poll_fn(|cx| {
            conn.reads
                .poll_body_read(Pin::new(&mut conn.io), &mut decoder, cx)
        })
        .await;
        let Ok(BodyRead::Data(data)) = read else {
            panic!("data")
        };
        assert_eq!(&data[..], b"hello");
        assert!(!conn.reads.buf.is_empty(), "the bad bytes are kept");
        assert_eq!(
            decoder.decode(&conn.reads.buf),
            Err(crate::http1::decode::DecodeError::InvalidChunkSize)
        );
    }
}
