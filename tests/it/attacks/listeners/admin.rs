//! The admin listener under 200 silent and 200 partial-head connections: a health probe is
//! still answered, and the listener holds no more sockets than its cap.

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{PATIENCE, config, exchange, metric, start, status};

/// Sockets of the server side of `port` still open (established), from /proc/net/tcp: the
/// test process holds the clients' sockets too, so its fd count would not tell them apart.
fn established_at(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3 && fields[1].ends_with(&local) && fields[3] == "01"
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_probe_gets_through_silent_and_partial_connections_and_sockets_stay_capped() {
    // The head timeout far away: what frees the listener is not the timeout.
    let clients = "head_timeout_ms = 60000";
    let l = start(config(
        "http://127.0.0.1:9",
        clients,
        "[admin]\nmax_connections = 16\n",
    ))
    .await;
    let mut held = Vec::new();
    for i in 0..400 {
        let mut stream = TcpStream::connect(l.admin).await.expect("connect");
        if i % 2 == 1 {
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nho")
                .await
                .expect("write");
        }
        held.push(stream);
    }
    let probe = "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let answer = exchange(l.admin, probe).await;
    assert_eq!(status(&answer), Some("200"), "{answer}");
    // Every connection before the probe was accepted by then; the evicted ones close as their
    // tasks run.
    let deadline = std::time::Instant::now() + PATIENCE;
    let port = l.admin.port();
    while established_at(port) > 16 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} open",
            established_at(port)
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    metric(
        &l.metrics,
        "toolpulse_client_connections_closed_total{listener=\"admin\",reason=\"evicted\"} 385",
    )
    .await;
    drop(held);
}
