//! A TCP forwarder in front of the test's MariaDB: the database made unreachable (`down`: the port
//! refuses and every connection is cut) or hung (`pause`: connections stay open, nothing passes)
//! for the API under test, while the shared server itself stays up.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub struct DbProxy {
    pub addr: SocketAddr,
    target: SocketAddr,
    /// The accept loop and every forwarded connection: aborting them is the outage.
    tasks: JoinSet<()>,
    paused: watch::Sender<bool>,
}

impl DbProxy {
    /// A proxy to the server of `url` (`mysql://user@host:port/database`), and the same URL
    /// through the proxy.
    pub async fn start(url: &str) -> (DbProxy, String) {
        let (server, database) = url.rsplit_once('/').unwrap();
        let (credentials, host) = server.rsplit_once('@').unwrap();
        let target = tokio::net::lookup_host(host).await.unwrap().next().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut proxy = DbProxy { addr, target, tasks: JoinSet::new(), paused: watch::channel(false).0 };
        proxy.serve(listener);
        (proxy, format!("{credentials}@{addr}/{database}"))
    }

    fn serve(&mut self, listener: TcpListener) {
        let (target, paused) = (self.target, self.paused.clone());
        self.tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let paused = paused.subscribe();
                connections.spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else { return };
                    let ((client_read, client_write), (server_read, server_write)) =
                        (client.into_split(), server.into_split());
                    let mut pumps = JoinSet::new();
                    pumps.spawn(pump(client_read, server_write, paused.clone()));
                    pumps.spawn(pump(server_read, client_write, paused));
                    pumps.join_next().await;
                });
            }
        });
    }

    /// The outage: the port refuses connections and every open one is cut.
    pub async fn down(&mut self) {
        self.tasks.shutdown().await;
    }

    pub async fn up(&mut self) {
        let listener = TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    /// The hang: connections stay open but nothing passes either way until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.paused.send_replace(true);
    }

    pub fn resume(&self) {
        self.paused.send_replace(false);
    }
}

/// Copies `from` to `to`, holding what it read while paused.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut paused: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if paused.wait_for(|paused| !*paused).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
