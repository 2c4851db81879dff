//! A loopback TCP proxy between a client and the engine. It counts the TDS
//! request messages the client sends, which is what a round trip costs, without
//! trusting any counter of the client's own, and it can hold traffic in either
//! direction to make a server unreachable or a reply go missing.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// TDS packet types that start a request: SQL batch, RPC, transaction manager.
const REQUEST_TYPES: [u8; 3] = [0x01, 0x03, 0x0E];
/// Status bit marking the last packet of a message.
const END_OF_MESSAGE: u8 = 0x01;

#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    messages: AtomicU64,
    framing_lost: AtomicBool,
}

/// A running proxy; it stops when dropped with the test's runtime.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    counts: Arc<Counts>,
    hold_requests: watch::Sender<bool>,
    hold_replies: watch::Sender<bool>,
}

impl Proxy {
    /// Starts forwarding to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let (hold_requests, requests_held) = watch::channel(false);
        let (hold_replies, replies_held) = watch::channel(false);
        let shared = counts.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(requests(
                    client_read,
                    server_write,
                    shared.clone(),
                    requests_held.clone(),
                ));
                tokio::spawn(replies(server_read, client_write, replies_held.clone()));
            }
        });
        Proxy {
            addr,
            counts,
            hold_requests,
            hold_replies,
        }
    }

    /// Request messages (batch, RPC, transaction) forwarded so far.
    pub fn requests(&self) -> u64 {
        assert!(
            !self.counts.framing_lost.load(Ordering::SeqCst),
            "the stream stopped looking like plaintext TDS (encrypted?): counts would be wrong"
        );
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Messages of any type forwarded so far.
    pub fn messages(&self) -> u64 {
        self.counts.messages.load(Ordering::SeqCst)
    }

    /// Stops (`true`) or resumes forwarding what the client sends.
    pub fn hold_requests(&self, hold: bool) {
        self.hold_requests.send_replace(hold);
    }

    /// Stops (`true`) or resumes forwarding what the server answers.
    pub fn hold_replies(&self, hold: bool) {
        self.hold_replies.send_replace(hold);
    }

    /// `ado` pointed at the proxy, in plaintext: after login, encrypted TDS
    /// packets could not be told apart.
    pub fn ado(&self, ado: &str) -> String {
        const REPLACED: [&str; 7] = [
            "server",
            "data source",
            "address",
            "addr",
            "network address",
            "encrypt",
            "trustservercertificate",
        ];
        let mut kept: Vec<&str> = ado
            .split(';')
            .filter(|pair| {
                let key = pair.split('=').next().unwrap_or("").trim().to_ascii_lowercase();
                !key.is_empty() && !REPLACED.contains(&key.as_str())
            })
            .collect();
        let server = format!("Server=tcp:127.0.0.1,{}", self.addr.port());
        kept.push(&server);
        kept.push("Encrypt=DANGER_PLAINTEXT");
        kept.join(";")
    }
}

async fn wait_while_held(held: &mut watch::Receiver<bool>) {
    while *held.borrow_and_update() {
        if held.changed().await.is_err() {
            return;
        }
    }
}

/// Forwards client packets one at a time, counting each finished message.
async fn requests(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    counts: Arc<Counts>,
    mut held: watch::Receiver<bool>,
) {
    let mut header = [0u8; 8];
    loop {
        if from.read_exact(&mut header).await.is_err() {
            return;
        }
        let length = u16::from_be_bytes([header[2], header[3]]) as usize;
        let known_type = matches!(header[0], 0x01 | 0x03 | 0x06 | 0x0E | 0x10 | 0x11 | 0x12 | 0x07);
        if length < 8 || !known_type {
            counts.framing_lost.store(true, Ordering::SeqCst);
            wait_while_held(&mut held).await;
            let _ = to.write_all(&header).await;
            let _ = tokio::io::copy(&mut from, &mut to).await;
            return;
        }
        let mut packet = vec![0u8; length];
        packet[..8].copy_from_slice(&header);
        if from.read_exact(&mut packet[8..]).await.is_err() {
            return;
        }
        wait_while_held(&mut held).await;
        if to.write_all(&packet).await.is_err() {
            return;
        }
        if header[1] & END_OF_MESSAGE != 0 {
            counts.messages.fetch_add(1, Ordering::SeqCst);
            if REQUEST_TYPES.contains(&header[0]) {
                counts.requests.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

async fn replies(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut held: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        wait_while_held(&mut held).await;
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
