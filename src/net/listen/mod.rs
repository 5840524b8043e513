//! What the three listeners (proxy, MCP front, admin) do with every client connection, so that
//! no client, however slow or silent, holds a connection or memory for long:
//!
//! - a request head within `[clients] head_timeout_ms` of the accept (the bytes that tell
//!   HTTP/1 from HTTP/2 included), and, on HTTP/1, of the end of the previous response
//!   ([`h1::conn`]); a request head at most `[proxy] max_header_bytes` long on the proxy
//!   listener, [`MAX_HEAD_BYTES`] (64 KiB) on the others;
//! - a connection with no request in flight for `idle_timeout_ms` is closed gracefully (HTTP/2:
//!   GOAWAY), and dropped if that does not finish in [`watched::CLOSE_GRACE`]; HTTP/2 peers are
//!   pinged every `ping_interval_ms` and dropped when they do not answer;
//! - a response the client takes no byte of for `send_timeout_ms` closes its connection (HTTP/1:
//!   [`h1::conn`] times its writes; HTTP/2: a frame given to hyper and not followed by another
//!   ask, [`activity`]);
//! - at most `max_streams_per_connection` concurrent HTTP/2 streams;
//! - request bodies: see `net::budget` (a deadline, and a global budget for the bodies
//!   toolpulse reads whole, with a share per peer address and per connection).

pub mod activity;
pub mod h1;
mod prefixed;
mod respond;
pub mod slots;
mod sniff;
pub mod watched;

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpStream;

use crate::config::ClientLimits;
use crate::http1::head::MAX_HEAD_BYTES;
use activity::{Activity, Tracked};
pub use respond::{ClientBody, Respond};
pub use sniff::Builders;
pub use watched::{Closed, Shutdown};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request's `Host` headers make it invalid (RFC 9112 §3.2: an HTTP/1.1 request has
/// exactly one; none has two), as nginx answers them: 400. HTTP/2 requests name their
/// authority in `:authority` and may leave `Host` out.
pub fn host_problem(version: http::Version, headers: &http::HeaderMap) -> Option<&'static str> {
    match headers.get_all(http::header::HOST).iter().count() {
        0 if version == http::Version::HTTP_11 => Some("an HTTP/1.1 request needs a Host header"),
        0 | 1 => None,
        _ => Some("a request has at most one Host header"),
    }
}

/// How client connections are served under `limits`; `max_header_bytes` bounds request heads
/// where the listener says so, else [`MAX_HEAD_BYTES`] does.
pub fn builder(limits: &ClientLimits, max_header_bytes: Option<usize>) -> Arc<Builders> {
    let http1 = h1::conn::Limits {
        head_timeout: limits.head_timeout,
        max_head_bytes: max_header_bytes.unwrap_or(MAX_HEAD_BYTES),
        send_timeout: limits.send_timeout,
    };
    let mut http2 = http2::Builder::new(TokioExecutor::new());
    http2
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.ping_interval))
        .keep_alive_timeout(limits.ping_timeout)
        .max_concurrent_streams(limits.max_streams_per_connection);
    if let Some(max) = max_header_bytes {
        http2.max_header_list_size(u32::try_from(max).unwrap_or(u32::MAX));
    }
    Arc::new(Builders::new(http1, http2))
}

/// Serves one client connection, its requests in flight told to `activity` (accepted now) so
/// that the caller can see whether it is in use; ends when it closes, when it is closed for
/// idleness, for want of a request head or for a client that takes no byte of its response
/// (the reason is returned), or when `shutdown` drains it.
pub async fn serve<H, F, B>(
    builders: &Builders,
    stream: TcpStream,
    shutdown: &Shutdown,
    limits: &ClientLimits,
    activity: Arc<Activity>,
    handle: H,
) -> (Option<Closed>, Result<(), BoxError>)
where
    H: Fn(Request<ClientBody>) -> F + Send + Sync + Unpin + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let requests = activity.clone();
    // The connection boxes this future until the response head is out.
    let respond = move |request: Request<ClientBody>| {
        let in_flight = requests.begin();
        // HTTP/1's own server times its writes itself.
        let watch_waits = request.version() == http::Version::HTTP_2;
        let response = handle(request);
        async move {
            response.await.map(|body| match watch_waits {
                true => Tracked::new(body, in_flight).watch_waits(),
                false => Tracked::new(body, in_flight),
            })
        }
    };
    let conn = sniff::Connection::new(builders, stream, respond);
    let mut watched = watched::Watched::new(
        conn,
        |conn| conn.graceful_shutdown(),
        activity,
        shutdown,
        limits,
    );
    let result = (&mut watched).await;
    (watched.closed().or(watched.conn().closed()), result)
}
