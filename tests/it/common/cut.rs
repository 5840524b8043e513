//! A TCP relay in front of a server (Redis, in the bus tests) that a test can cut without
//! touching the server: while cut, what clients send is dropped on the floor (connections stay
//! open, nothing answers, as a network partition looks); when mended, every connection made
//! so far is closed, and new ones are relayed again. The server keeps its data throughout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Cut {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    /// Bumped by [`Cut::mend`]: connections made before it close.
    generation: watch::Sender<u64>,
}

impl Cut {
    pub async fn start(target: SocketAddr) -> Cut {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0);
        let (dropping, closing) = (cut.clone(), generation.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, dropping.clone(), closing.subscribe()));
            }
        });
        Cut {
            addr,
            cut,
            generation,
        }
    }

    /// From now on nothing clients send reaches the server.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Closes every connection (their streams lost bytes) and relays new ones again.
    pub fn mend(&self) {
        self.cut.store(false, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    cut: Arc<AtomicBool>,
    mut generation: watch::Receiver<u64>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if !cut.load(Ordering::SeqCst) && server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = tokio::io::copy(&mut server_read, &mut client_write);
    tokio::select! {
        () = up => {}
        _ = down => {}
        _ = generation.changed() => {}
    }
}
