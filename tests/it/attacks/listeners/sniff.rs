//! Connections that send a part of the HTTP/2 preface (`P`) and then nothing: each is closed at
//! the head timeout, and costs, while open, what a silent one costs: the listener's connections
//! are polled about once per arrival of bytes, not again and again until the timeout.

use std::sync::Arc;
use std::time::Duration;

use http::Response;
use http_body_util::Full;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use toolpulse::config::ClientLimits;
use toolpulse::net::listen::activity::Activity;
use toolpulse::net::listen::{self, ClientBody, Shutdown};

use super::until_closed;

/// Connections in the test.
const CONNECTIONS: u64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_preface_waits_for_bytes_and_is_closed_at_the_head_timeout() {
    let limits = Arc::new(ClientLimits {
        head_timeout: Duration::from_millis(500),
        ..ClientLimits::default()
    });
    let builders = listen::builder(&limits, None);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (serving, shutdown) = (builders.clone(), Shutdown::default());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (builders, limits, shutdown) = (serving.clone(), limits.clone(), shutdown.clone());
            tokio::spawn(async move {
                let handle = |_: http::Request<ClientBody>| async {
                    Response::new(Full::new(bytes::Bytes::from_static(b"ok")))
                };
                let activity = Activity::new(std::time::Instant::now());
                let _ =
                    listen::serve(&builders, stream, &shutdown, &limits, activity, handle).await;
            });
        }
    });
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut client = TcpStream::connect(addr).await.expect("connect");
        client.write_all(b"P").await.expect("write");
        clients.push(client);
    }
    for client in &mut clients {
        let answer = until_closed(client).await;
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    }
    // Accepted, the `P`, the head timeout: three per connection, and a little slack for a
    // wake-up that finds nothing new. Peeking again every 5 ms made it a hundred each.
    let polls = builders.sniff_polls();
    assert!(polls <= 4 * CONNECTIONS, "{polls} polls");
}
