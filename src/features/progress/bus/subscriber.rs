//! This replica's channel: reports for its streams and decisions for its waiting MCP calls
//! arrive here. One connection in subscribe mode, pinged so that a silently dead connection is
//! noticed; reconnected with back-off (at once when the bus is reached again).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};

use super::keys::replica_channel;
use super::link::{BACKOFF_MAX, BACKOFF_MIN, CONNECT_TIMEOUT, OP_TIMEOUT};
use super::shared::Shared;
use crate::metrics::BusOp;

/// How often the subscribed connection is checked with a `PING`.
pub const PING_EVERY: Duration = Duration::from_secs(10);

pub(crate) async fn run(shared: Arc<Shared>) {
    let link = shared.link.clone();
    let channel = replica_channel(&link.prefix, &link.replica);
    let mut backoff = BACKOFF_MIN;
    loop {
        match subscribe(&link.client, &channel).await {
            Ok((sink, stream)) => {
                backoff = BACKOFF_MIN;
                let error = listen(&shared, sink, stream).await;
                link.failed(BusOp::Subscribe, &error);
            }
            Err(error) => link.failed(BusOp::Subscribe, &error),
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = link.came_back.notified() => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

async fn subscribe(
    client: &redis::Client,
    channel: &str,
) -> Result<(PubSubSink, PubSubStream), String> {
    let connect = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub.split())
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(split)) => Ok(split),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("no answer in time".into()),
    }
}

/// Hands messages over until the connection fails; returns why.
async fn listen(shared: &Shared, mut sink: PubSubSink, mut stream: PubSubStream) -> String {
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        tokio::select! {
            message = stream.next() => match message {
                Some(message) => shared.received(message.get_payload_bytes()),
                None => return "the subscribed connection closed".into(),
            },
            _ = ping.tick() => {
                let answer = tokio::time::timeout(OP_TIMEOUT, sink.ping::<redis::Value>()).await;
                if !matches!(answer, Ok(Ok(_))) {
                    return "no answer to PING on the subscribed connection".into();
                }
            }
        }
    }
}
