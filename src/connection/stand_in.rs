//! A loopback TDS stand-in for offline tests: it answers each pre-login
//! without encryption, records the login that follows, and answers it as the
//! test asks, so what a connection sends, how a refusal is reported and what
//! a call does around its round trip can be checked without an engine.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the stand-in answers each login.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Answer {
    /// Refuses the login with a server error, as Azure SQL answers 40613
    /// ("database not currently available") during a failover.
    Refuse { number: u32, message: &'static str },
    /// Signs the login in, then answers every request with a server error,
    /// as a database without the called procedure answers 2812: a whole
    /// round trip, for what must hold of any call.
    FailEachRequest { number: u32, message: &'static str },
    /// Signs the login in, then reads every request and answers none, as a
    /// session on a server that stopped answering (a half-open socket after
    /// a failover, a stalled network path).
    SilentAfterLogin,
}

/// A running stand-in; it stops with the test's runtime.
pub(crate) struct StandIn {
    pub(crate) port: u16,
    logins: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl StandIn {
    pub(crate) async fn start(answer: Answer) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let logins = Arc::<Mutex<Vec<Vec<u8>>>>::default();
        let recorded = logins.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, answer, recorded.clone()));
            }
        });
        StandIn { port, logins }
    }

    /// A plaintext connection string for the stand-in, with `extra` keys.
    pub(crate) fn ado(&self, extra: &str) -> String {
        format!("Server=tcp:127.0.0.1,{};Encrypt=DANGER_PLAINTEXT;{extra}", self.port)
    }

    /// How many logins arrived so far.
    pub(crate) fn logins(&self) -> usize {
        self.logins.lock().unwrap().len()
    }

    /// Whether the login at `index` carries `text` in UTF-16, as a LOGIN7
    /// message carries names and a FEDAUTH token.
    pub(crate) fn login_carries(&self, index: usize, text: &str) -> bool {
        let needle: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        self.logins.lock().unwrap()[index]
            .windows(needle.len())
            .any(|window| window == needle)
    }
}

async fn serve(mut stream: TcpStream, answer: Answer, logins: Arc<Mutex<Vec<Vec<u8>>>>) {
    let Ok((0x12, _)) = read_message(&mut stream).await else {
        return;
    };
    if stream.write_all(&prelogin_reply()).await.is_err() {
        return;
    }
    let Ok((0x10, login)) = read_message(&mut stream).await else {
        return;
    };
    logins.lock().unwrap().push(login);
    match answer {
        Answer::Refuse { number, message } => {
            let _ = stream.write_all(&refusal(number, message)).await;
            // Read until the client hangs up, so the refusal is not cut short.
            let mut sink = [0u8; 256];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        }
        Answer::FailEachRequest { number, message } => {
            if stream.write_all(&login_ack()).await.is_err() {
                return;
            }
            while read_message(&mut stream).await.is_ok() {
                if stream.write_all(&refusal(number, message)).await.is_err() {
                    return;
                }
            }
        }
        Answer::SilentAfterLogin => {
            if stream.write_all(&login_ack()).await.is_err() {
                return;
            }
            while read_message(&mut stream).await.is_ok() {}
        }
    }
}

/// A LOGINACK token (TDS 7.4, "stand-in" version 16.0) and a DONE: the login
/// succeeded.
fn login_ack() -> Vec<u8> {
    let name: Vec<u16> = "stand-in".encode_utf16().collect();
    let mut body = vec![1]; // interface: SQL
    body.extend_from_slice(&0x7400_0004u32.to_be_bytes());
    body.push(name.len() as u8);
    body.extend(name.iter().flat_map(|unit| unit.to_le_bytes()));
    body.extend_from_slice(&[16, 0, 0, 0]);
    let mut tokens = vec![0xAD];
    tokens.extend_from_slice(&(body.len() as u16).to_le_bytes());
    tokens.extend_from_slice(&body);
    tokens.push(0xFD);
    tokens.extend_from_slice(&0u16.to_le_bytes()); // DONE_FINAL
    tokens.extend_from_slice(&0u16.to_le_bytes());
    tokens.extend_from_slice(&0u64.to_le_bytes());
    packet(0x04, &tokens)
}

/// A pre-login answer: version 16.0, encryption NOT_SUP.
fn prelogin_reply() -> Vec<u8> {
    let mut payload = vec![
        0x00, 0x00, 11, 0x00, 6, // VERSION at offset 11, 6 bytes
        0x01, 0x00, 17, 0x00, 1,    // ENCRYPTION at offset 17, 1 byte
        0xff, // terminator
    ];
    payload.extend_from_slice(&[16, 0, 0, 0, 0, 0]);
    payload.push(0x02);
    packet(0x04, &payload)
}

/// An ERROR token (class 14, as login refusals are) and a DONE with the
/// error bit, the way a server refuses a login or a request.
fn refusal(number: u32, message: &str) -> Vec<u8> {
    let utf16 = |s: &str| -> Vec<u8> { s.encode_utf16().flat_map(u16::to_le_bytes).collect() };
    let mut body = Vec::new();
    body.extend_from_slice(&number.to_le_bytes());
    body.extend_from_slice(&[1, 14]); // state, class
    body.extend_from_slice(&(message.encode_utf16().count() as u16).to_le_bytes());
    body.extend_from_slice(&utf16(message));
    body.push(6);
    body.extend_from_slice(&utf16("stand1"));
    body.push(0); // no procedure
    body.extend_from_slice(&1u32.to_le_bytes()); // line
    let mut tokens = vec![0xAA];
    tokens.extend_from_slice(&(body.len() as u16).to_le_bytes());
    tokens.extend_from_slice(&body);
    tokens.push(0xFD);
    tokens.extend_from_slice(&2u16.to_le_bytes()); // DONE_ERROR
    tokens.extend_from_slice(&0u16.to_le_bytes());
    tokens.extend_from_slice(&0u64.to_le_bytes());
    packet(0x04, &tokens)
}

fn packet(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() + 8) as u16;
    let mut p = vec![kind, 0x01, (len >> 8) as u8, len as u8, 0, 0, 1, 0];
    p.extend_from_slice(payload);
    p
}

/// Reads one TDS message (packets up to end-of-message): its type and payload.
async fn read_message(stream: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut payload = Vec::new();
    loop {
        let mut header = [0u8; 8];
        stream.read_exact(&mut header).await?;
        let len = u16::from_be_bytes([header[2], header[3]]) as usize;
        let mut body = vec![0u8; len.saturating_sub(8)];
        stream.read_exact(&mut body).await?;
        payload.extend_from_slice(&body);
        if header[1] & 0x01 == 0x01 {
            return Ok((header[0], payload));
        }
    }
}
