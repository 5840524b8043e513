//! A client socket whose first bytes were read already, to tell HTTP/1 from HTTP/2: they are
//! read again first, then the socket. At most the HTTP/2 preface (24 bytes) is kept.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The most bytes a [`Prefixed`] holds: the HTTP/2 preface's length.
pub const MAX_PREFIX: usize = 24;

pub struct Prefixed {
    first: [u8; MAX_PREFIX],
    /// The part of `first` not yet read again.
    at: usize,
    len: usize,
    stream: TcpStream,
}

impl Prefixed {
    /// `first` (at most [`MAX_PREFIX`] bytes), then `stream`.
    pub fn new(first: &[u8], stream: TcpStream) -> Self {
        let mut kept = [0; MAX_PREFIX];
        let len = first.len().min(MAX_PREFIX);
        kept[..len].copy_from_slice(&first[..len]);
        Prefixed {
            first: kept,
            at: 0,
            len,
            stream,
        }
    }
}

impl AsyncRead for Prefixed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.len {
            let n = (this.len - this.at).min(buf.remaining());
            buf.put_slice(&this.first[this.at..this.at + n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn the_first_bytes_then_the_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let mut client = client.expect("connect");
        client.write_all(b"rest").await.expect("write");
        drop(client);
        let mut ours = Prefixed::new(b"PRI ", accepted.expect("accept").0);
        let mut all = Vec::new();
        ours.read_to_end(&mut all).await.expect("read");
        assert_eq!(all, b"PRI rest");
    }
}
