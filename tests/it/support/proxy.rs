//! A loopback TCP proxy between a client and the engine. It counts the TDS
//! request messages the client sends, which is what a round trip costs, without
//! trusting any counter of the client's own; it can hold traffic in either
//! direction to make a server unreachable or a reply go missing, and cut the
//! connection at a chosen point of the next request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
    connections: AtomicU64,
    cuts: AtomicU64,
    framing_lost: AtomicBool,
    /// Connections numbered below this forward nothing any more.
    hung_below: AtomicU64,
    /// Requests a client sent on a half-open connection, never forwarded.
    swallowed: AtomicU64,
}

/// Where to cut the connection that carries the next request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// The request never reaches the server.
    BeforeRequest,
    /// The request reaches the server, which runs it; no byte of the reply
    /// reaches the client.
    BeforeReply,
    /// The reply starts to arrive, and the connection closes half way.
    MidReply,
    /// The request never reaches the server and the connection stays open,
    /// silent both ways: a half-open connection that only a timeout ends.
    Hang,
}

/// A cut waiting for the next request, shared by every connection, and
/// the text (UTF-16LE, as TDS sends it) that request must hold, if any.
type Armed = Arc<Mutex<Option<(Cut, Option<Vec<u8>>)>>>;

/// A running proxy; it stops when dropped with the test's runtime.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    counts: Arc<Counts>,
    hold_requests: watch::Sender<bool>,
    hold_replies: watch::Sender<bool>,
    armed: Armed,
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
        let armed = Armed::default();
        let shared_armed = armed.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let number = shared.connections.fetch_add(1, Ordering::SeqCst);
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                // What the request side decided for this connection's reply.
                let (cut_reply, reply_cut) = watch::channel(None);
                tokio::spawn(requests(
                    number,
                    client_read,
                    server_write,
                    shared.clone(),
                    requests_held.clone(),
                    shared_armed.clone(),
                    cut_reply,
                ));
                tokio::spawn(replies(
                    number,
                    server_read,
                    client_write,
                    shared.clone(),
                    replies_held.clone(),
                    reply_cut,
                ));
            }
        });
        Proxy {
            addr,
            counts,
            hold_requests,
            hold_replies,
            armed,
        }
    }

    /// Cuts the connection that carries the next request, at `cut`.
    pub fn cut_next(&self, cut: Cut) {
        *self.armed.lock().unwrap() = Some((cut, None));
    }

    /// Cuts the connection that carries the next request naming `text` (a
    /// procedure's name, say) in its last packet, at `cut`; other requests
    /// pass. For a client whose other sessions (handover signals, their
    /// idle checks) send requests of their own meanwhile.
    pub fn cut_next_naming(&self, cut: Cut, text: &str) {
        let utf16: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        *self.armed.lock().unwrap() = Some((cut, Some(utf16)));
    }

    /// Whether a cut is still waiting for its request.
    pub fn cut_pending(&self) -> bool {
        self.armed.lock().unwrap().is_some()
    }

    /// Connections cut so far.
    pub fn cuts(&self) -> u64 {
        self.counts.cuts.load(Ordering::SeqCst)
    }

    /// Connections opened through the proxy so far.
    pub fn connections(&self) -> u64 {
        self.counts.connections.load(Ordering::SeqCst)
    }

    /// Request messages (batch, RPC, transaction) forwarded so far.
    pub fn requests(&self) -> u64 {
        assert!(
            !self.counts.framing_lost.load(Ordering::SeqCst),
            "the stream stopped looking like plaintext TDS (encrypted?): counts would be wrong"
        );
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Requests sent on a connection made half-open by
    /// [`Proxy::hang_open_connections`]: each reached no server.
    pub fn swallowed(&self) -> u64 {
        self.counts.swallowed.load(Ordering::SeqCst)
    }

    /// Messages of any type forwarded so far.
    pub fn messages(&self) -> u64 {
        self.counts.messages.load(Ordering::SeqCst)
    }

    /// Makes every connection opened so far half-open, as a failover leaves
    /// them: open at both ends, silent both ways, while new connections
    /// work.
    pub fn hang_open_connections(&self) {
        let opened = self.counts.connections.load(Ordering::SeqCst);
        self.counts.hung_below.store(opened, Ordering::SeqCst);
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
/// The last packet of a request takes an armed cut with it.
async fn requests(
    number: u64,
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    counts: Arc<Counts>,
    mut held: watch::Receiver<bool>,
    armed: Armed,
    cut_reply: watch::Sender<Option<Cut>>,
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
        let last_of_request = header[1] & END_OF_MESSAGE != 0 && REQUEST_TYPES.contains(&header[0]);
        if number < counts.hung_below.load(Ordering::SeqCst) {
            if last_of_request {
                counts.swallowed.fetch_add(1, Ordering::SeqCst);
            }
            continue;
        }
        let taken = if last_of_request {
            let mut armed = armed.lock().unwrap();
            let matches = match armed.as_ref() {
                Some((_, Some(text))) => packet.windows(text.len()).any(|window| window == text.as_slice()),
                Some((_, None)) => true,
                None => false,
            };
            if matches {
                armed.take().map(|(cut, _)| cut)
            } else {
                None
            }
        } else {
            None
        };
        if let Some(cut) = taken {
            counts.cuts.fetch_add(1, Ordering::SeqCst);
            if cut == Cut::Hang {
                // Keeps both halves open, forwarding nothing, until the
                // client gives up on the connection.
                cut_reply.send_replace(Some(cut));
                let mut sink = [0u8; 1024];
                while matches!(from.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            if cut == Cut::BeforeRequest {
                // Closing both halves here and the reply side below ends the
                // connection with the request unsent.
                cut_reply.send_replace(Some(cut));
                return;
            }
            // Set before the request leaves, so no reply byte can beat it.
            cut_reply.send_replace(Some(cut));
        }
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

/// Forwards server bytes to the client until a cut ends the connection.
async fn replies(
    number: u64,
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    counts: Arc<Counts>,
    mut held: watch::Receiver<bool>,
    mut cut: watch::Receiver<Option<Cut>>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buffer) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            // A request cut before it was sent: there will be no reply.
            _ = cut.wait_for(|c| *c == Some(Cut::BeforeRequest)) => return,
        };
        wait_while_held(&mut held).await;
        if number < counts.hung_below.load(Ordering::SeqCst) {
            continue;
        }
        let forward = match *cut.borrow() {
            None => n,
            Some(Cut::MidReply) => n / 2,
            Some(Cut::BeforeReply | Cut::BeforeRequest) => 0,
            // The server sends nothing for the request it never saw.
            Some(Cut::Hang) => continue,
        };
        if to.write_all(&buffer[..forward]).await.is_err() || forward < n {
            // Dropping both halves closes the client's connection.
            return;
        }
    }
}
