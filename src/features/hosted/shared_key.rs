//! The key of hosted ids for replicas that share a Redis (`[progress] bus`) but were given no
//! `[hosted] key`: made once in Redis and read by every replica, so that each verifies the
//! others' ids and a next turn maps wherever it lands.
//!
//! The first replica to start puts a random key (`SET <prefix>:hosted:key <64 hex digits> NX`,
//! no expiry: it must outlive every pair signed with it); every replica then reads the one
//! that won (`GET`). Redis not answering at start is retried with back-off for
//! [`AGREE_TIMEOUT`]; after that the caller refuses to start: a replica signing with a key of
//! its own would make every next turn that crosses replicas fail (the client gets a 400), while
//! it looks healthy. A process that exits is restarted by its orchestrator, and a configured
//! key removes the dependency altogether.

use std::time::Duration;

use super::id::Key;
use crate::config::BusConfig;
use crate::config::hosted::MIN_KEY_BYTES;

/// How long a replica without a key waits for Redis at start before it gives up.
pub const AGREE_TIMEOUT: Duration = Duration::from_secs(30);
/// One attempt: connect, `SET NX`, `GET`.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The Redis key the shared key is kept under.
pub fn redis_key(prefix: &str) -> String {
    format!("{prefix}:hosted:key")
}

/// The key every replica on `bus` uses, made by the first of them; an error once Redis did
/// not answer for `timeout`.
pub async fn agree(bus: &BusConfig, timeout: Duration) -> anyhow::Result<Key> {
    // rediss:// uses rustls with the process's default provider: ring, as the bus's link.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = redis::Client::open(bus.url.expose())
        .map_err(|e| anyhow::anyhow!("[progress] bus: {e}"))?;
    let name = redis_key(&bus.prefix);
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    let mine: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut backoff = BACKOFF_MIN;
    loop {
        let attempt = tokio::time::timeout(ATTEMPT_TIMEOUT, attempt(&client, &name, &mine)).await;
        let error = match attempt {
            Ok(Ok(shared)) if shared.len() >= MIN_KEY_BYTES => {
                tracing::info!(
                    made_here = shared == mine,
                    "hosted id key shared through the progress bus's Redis"
                );
                return Ok(Key::new(shared.as_bytes()));
            }
            Ok(Ok(_)) => format!("{name} in Redis is shorter than {MIN_KEY_BYTES} bytes"),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {} ms", ATTEMPT_TIMEOUT.as_millis()),
        };
        if tokio::time::Instant::now() + backoff > deadline {
            anyhow::bail!(
                "no [hosted] key (nor TOOLPULSE_HOSTED_KEY), and the progress bus's Redis did not \
                 give the replicas' shared one within {} s ({error}): set [hosted] key, or make \
                 Redis reachable",
                timeout.as_secs()
            );
        }
        tracing::warn!(%error, "waiting for Redis to share the hosted id key");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

async fn attempt(client: &redis::Client, name: &str, mine: &str) -> redis::RedisResult<String> {
    let mut conn = client.get_multiplexed_async_connection().await?;
    redis::cmd("SET")
        .arg(name)
        .arg(mine)
        .arg("NX")
        .query_async::<Option<String>>(&mut conn)
        .await?;
    redis::cmd("GET").arg(name).query_async(&mut conn).await
}
