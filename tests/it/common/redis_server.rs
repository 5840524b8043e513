//! A real `redis-server` for the tests, on a free loopback port, without persistence. `.ci/run`
//! installs Debian's; outside CI a machine without it skips the Redis tests with a message, in
//! CI (`CI` set) a missing server fails them.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const REDIS_SERVER: &str = "redis-server";

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
}

/// Whether to run: the server is installed, or (outside CI) skip with a message.
pub fn available(test: &str) -> bool {
    let found = Command::new(REDIS_SERVER)
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{REDIS_SERVER} is not installed, and CI must run {test}: apt-get install redis-server"
        );
    }
    eprintln!("SKIPPED {test}: {REDIS_SERVER} is not installed (apt-get install redis-server)");
    false
}

impl RedisServer {
    /// Starts a server on a free port, or `None` when the test is to be skipped.
    pub fn start(test: &str) -> Option<RedisServer> {
        if !available(test) {
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut server = RedisServer { child: None, port };
        server.restart();
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Starts it again (on the same port) after [`RedisServer::stop`].
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = Command::new(REDIS_SERVER)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.ping().is_err() {
            assert!(Instant::now() < deadline, "redis-server did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it (SIGKILL: as a crash or a network cut would look to toolpulse).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open and the data stays, but nothing
    /// answers, as a network cut looks to toolpulse. [`RedisServer::resume`] thaws it.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a server [`RedisServer::pause`] froze (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("running");
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    pub fn connection(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("url");
        client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect to redis-server")
    }

    fn ping(&self) -> redis::RedisResult<String> {
        let address: SocketAddr = ([127, 0, 0, 1], self.port).into();
        std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200))?;
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_millis(500))?;
        redis::cmd("PING").query(&mut conn)
    }

    /// The channels under `prefix` with a subscriber (the replicas listening).
    pub fn channels(&self, prefix: &str) -> usize {
        let mut conn = self.connection();
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg(format!("{prefix}:*"))
            .query(&mut conn)
            .expect("PUBSUB CHANNELS");
        channels.len()
    }

    /// Every key under `prefix`, with its remaining TTL in ms (-1: none).
    pub fn keys(&self, prefix: &str) -> Vec<(String, i64)> {
        let mut conn = self.connection();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query(&mut conn)
            .expect("KEYS");
        keys.into_iter()
            .map(|k| {
                let ttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut conn).expect("PTTL");
                (k, ttl)
            })
            .collect()
    }
}

impl RedisServer {
    /// Every key under `prefix` with all it holds, one text per key: its name, then its
    /// members or value (sets, sorted sets with their scores, hashes, lists, strings), so a
    /// test can look for a value anywhere in the registry, not only in key names.
    pub fn contents(&self, prefix: &str) -> Vec<String> {
        let mut conn = self.connection();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query(&mut conn)
            .expect("KEYS");
        let mut out = Vec::new();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).expect("TYPE");
            let held: Vec<String> = match kind.as_str() {
                "string" => vec![redis::cmd("GET").arg(&key).query(&mut conn).expect("GET")],
                "set" => redis::cmd("SMEMBERS")
                    .arg(&key)
                    .query(&mut conn)
                    .expect("SMEMBERS"),
                "zset" => redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(&mut conn)
                    .expect("ZRANGE"),
                "hash" => redis::cmd("HGETALL")
                    .arg(&key)
                    .query(&mut conn)
                    .expect("HGETALL"),
                "list" => redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query(&mut conn)
                    .expect("LRANGE"),
                // Expired between KEYS and TYPE.
                "none" => continue,
                other => panic!("{key}: a {other} toolpulse never writes"),
            };
            out.push(format!("{key} {kind}: {}", held.join(" ")));
        }
        out
    }

    /// Listens (PSUBSCRIBE) to every channel under `prefix` on a thread of its own; what it
    /// heard so far is in the returned list as "channel: payload".
    pub fn listen(&self, prefix: &str) -> Heard {
        let heard = Heard::default();
        let mut conn = self.connection();
        let pattern = format!("{prefix}:*");
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let sink = heard.clone();
        std::thread::spawn(move || {
            let mut pubsub = conn.as_pubsub();
            pubsub.psubscribe(&pattern).expect("PSUBSCRIBE");
            let _ = ready_tx.send(());
            // Ends with the server (the connection drops) or the test process.
            while let Ok(message) = pubsub.get_message() {
                let payload: String = message.get_payload().unwrap_or_default();
                let line = format!("{}: {payload}", message.get_channel_name());
                sink.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        ready.recv().expect("subscribed");
        heard
    }
}

/// The messages a [`RedisServer::listen`] heard.
#[derive(Debug, Clone, Default)]
pub struct Heard(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Heard {
    /// Publishes a marker under `prefix` and returns it: once it is among [`Heard::messages`],
    /// so is everything published before it (Redis delivers a subscriber's messages in order).
    pub fn mark(&self, redis: &RedisServer, prefix: &str) -> String {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let marker = format!("test marker {n}");
        let _: i64 = redis::cmd("PUBLISH")
            .arg(format!("{prefix}:test-marker"))
            .arg(&marker)
            .query(&mut redis.connection())
            .expect("PUBLISH");
        marker
    }

    pub fn messages(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
