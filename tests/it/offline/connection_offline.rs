//! Reaching a server and signing in, against loopback stand-ins: a TDS
//! listener that answers the pre-login and records the login packet, listeners
//! that close or stay silent, and a SQL Browser on UDP port 1434.

use crate::support;

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use fencepost::{ConnectError, ConnectionString};

/// A pre-login answer: version 16.0, encryption NOT_SUP (so the login that
/// follows travels in the clear and can be read here).
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

fn packet(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() + 8) as u16;
    let mut p = vec![kind, 0x01, (len >> 8) as u8, len as u8, 0, 0, 1, 0];
    p.extend_from_slice(payload);
    p
}

/// Reads one TDS message (packets up to end-of-message); returns its type and payload.
fn read_message(stream: &mut impl Read) -> std::io::Result<(u8, Vec<u8>)> {
    let mut payload = Vec::new();
    loop {
        let mut header = [0u8; 8];
        stream.read_exact(&mut header)?;
        let len = u16::from_be_bytes([header[2], header[3]]) as usize;
        let mut body = vec![0u8; len.saturating_sub(8)];
        stream.read_exact(&mut body)?;
        payload.extend_from_slice(&body);
        if header[1] & 0x01 == 0x01 {
            return Ok((header[0], payload));
        }
    }
}

/// A TDS stand-in on a loopback port: answers one pre-login, sends the login
/// message it then receives down the channel, and closes.
fn tds_recorder() -> (u16, mpsc::Receiver<(u8, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let Ok((0x12, _)) = read_message(&mut stream) else {
            return;
        };
        stream.write_all(&prelogin_reply()).unwrap();
        if let Ok(login) = read_message(&mut stream) {
            let _ = tx.send(login);
        }
    });
    (port, rx)
}

/// The fields of a LOGIN7 payload this test looks at.
struct Login7 {
    extension: bool,
    user_chars: u16,
    password_chars: u16,
    bytes: Vec<u8>,
}

impl Login7 {
    /// The first feature of the FeatureExt block: its id and its data. With
    /// fExtension set, ibExtension (offset 56) points at a DWORD holding the
    /// block's offset; each feature is an id byte, a DWORD length, the data.
    fn first_feature(&self) -> (u8, &[u8]) {
        let bytes = &self.bytes;
        let ib_extension = u16::from_le_bytes([bytes[56], bytes[57]]) as usize;
        let dword_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
        let block = dword_at(ib_extension);
        let length = dword_at(block + 1);
        (bytes[block], &bytes[block + 5..block + 5 + length])
    }
}

fn login7(payload: &[u8]) -> Login7 {
    let u16_at = |i: usize| u16::from_le_bytes([payload[i], payload[i + 1]]);
    Login7 {
        // OptionFlags3, fExtension: a FeatureExt block follows (FEDAUTH here).
        extension: payload[27] & 0x10 != 0,
        user_chars: u16_at(42),
        password_chars: u16_at(46),
        bytes: payload.to_vec(),
    }
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn an_access_token_is_sent_as_a_fedauth_login_not_a_sql_login() {
    let (port, rx) = tds_recorder();
    let mut s = ConnectionString::parse(&format!(
        "Server=tcp:127.0.0.1,{port};Database=app;Authentication=ActiveDirectoryAccessToken;Encrypt=DANGER_PLAINTEXT"
    ))
    .unwrap();
    s.set_access_token("eyJ0eXAiOiJKV1Qi.test-token").unwrap();
    let _ = s.connect().await;
    let (kind, payload) = rx.recv_timeout(Duration::from_secs(10)).expect("a login packet");
    assert_eq!(kind, 0x10, "a LOGIN7 message");
    let login = login7(&payload);
    assert!(login.extension, "the login carries a feature extension");
    assert_eq!(
        (login.user_chars, login.password_chars),
        (0, 0),
        "no SQL login name or password"
    );
    // FeatureExt: FEDAUTH (0x02), its data carrying the token in UTF-16.
    assert!(contains(&login.bytes, &utf16("eyJ0eXAiOiJKV1Qi.test-token")));
    let (feature, data) = login.first_feature();
    assert_eq!(feature, 0x02, "the feature is FEDAUTH");
    assert!(
        contains(data, &utf16("eyJ0eXAiOiJKV1Qi.test-token")),
        "the token is FEDAUTH's data"
    );
}

#[tokio::test]
async fn a_sql_login_is_sent_with_its_name_and_no_extension() {
    let (port, rx) = tds_recorder();
    let s = ConnectionString::parse(&format!(
        "Server=tcp:127.0.0.1,{port};Database=app;User ID=deployer;Password=pw;Encrypt=DANGER_PLAINTEXT"
    ))
    .unwrap();
    let _ = s.connect().await;
    let (_, payload) = rx.recv_timeout(Duration::from_secs(10)).expect("a login packet");
    let login = login7(&payload);
    assert!(!login.extension);
    assert_eq!(login.user_chars, 8);
    assert!(contains(&login.bytes, &utf16("deployer")));
}

#[tokio::test]
async fn a_server_that_closes_during_login_is_named_so() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming().take(1) {
            drop(stream);
        }
    });
    let s = ConnectionString::parse(&format!("Server=tcp:127.0.0.1,{port};User ID=u;Password=p")).unwrap();
    let err = s.connect().await.unwrap_err();
    assert!(matches!(err, ConnectError::ClosedDuringLogin { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("closed the connection during login") && text.contains("TDS"),
        "{text}"
    );
    assert!(!text.contains("cannot reach"), "{text}");
}

#[tokio::test]
async fn a_server_that_stays_silent_is_a_handshake_timeout_not_driver_advice() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (hold_tx, hold_rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let _ = hold_rx.recv_timeout(Duration::from_secs(10));
        drop(stream);
    });
    let s = ConnectionString::parse(&format!(
        "Server=tcp:127.0.0.1,{port};User ID=u;Password=p;Connect Timeout=1"
    ))
    .unwrap();
    let started = std::time::Instant::now();
    let err = s.connect().await.unwrap_err();
    drop(hold_tx);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(err, ConnectError::HandshakeTimedOut { .. }), "{err:?}");
    let text = format!("{err:#}");
    assert!(
        text.contains("accepted the connection but did not complete the login within 1s"),
        "{text}"
    );
    for advice in ["Config::", "tracing", "cannot reach"] {
        assert!(!text.contains(advice), "{text}");
    }
}

/// A SQL Browser on 127.0.0.1:1434 (the port the driver asks): records each
/// request and answers with an SVR_RESP naming `tcp_port`, or not at all.
fn sql_browser(socket: UdpSocket, tcp_port: Option<u16>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    thread::spawn(move || {
        let mut buf = [0u8; 1024];
        if let Ok((len, from)) = socket.recv_from(&mut buf) {
            let _ = tx.send(buf[..len].to_vec());
            if let Some(port) = tcp_port {
                let data =
                    format!("ServerName;TESTHOST;InstanceName;FENCE;IsClustered;No;Version;16.0.1000.6;tcp;{port};;");
                let mut reply = vec![0x05];
                reply.extend_from_slice(&(data.len() as u16).to_le_bytes());
                reply.extend_from_slice(data.as_bytes());
                socket.send_to(&reply, from).unwrap();
            }
        }
    });
    rx
}

/// A TCP listener that reports each connection it accepts, then closes it.
fn recording_listener() -> (u16, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming().take(1) {
            let _ = tx.send(());
            drop(stream);
        }
    });
    (port, rx)
}

/// One test, so that one SQL Browser at a time holds UDP port 1434.
#[tokio::test]
async fn a_named_instance_s_port_comes_from_the_sql_browser_and_an_explicit_port_wins() {
    // The port is free again once the previous browser's thread has ended.
    let bind = || {
        let mut tries = 0;
        loop {
            match UdpSocket::bind("127.0.0.1:1434") {
                Err(_) if tries < 60 => {
                    tries += 1;
                    thread::sleep(Duration::from_millis(100));
                }
                other => return other,
            }
        }
    };
    if let Err(e) = UdpSocket::bind("127.0.0.1:1434") {
        support::skip(
            "a_named_instance_s_port_comes_from_the_sql_browser_and_an_explicit_port_wins",
            &format!("UDP 127.0.0.1:1434 is taken ({e})"),
        );
        return;
    }

    // The instance's port is asked of the browser, then dialled.
    let (tcp_port, accepted) = recording_listener();
    let requests = sql_browser(bind().unwrap(), Some(tcp_port));
    let s = ConnectionString::parse("Server=127.0.0.1\\FENCE;User ID=u;Password=p").unwrap();
    assert_eq!(s.server(), "127.0.0.1\\FENCE");
    let err = s.connect().await.unwrap_err();
    let request = requests
        .recv_timeout(Duration::from_secs(5))
        .expect("a SQL Browser request");
    assert_eq!(request, b"\x04FENCE", "CLNT_UCAST_INST for the instance");
    accepted
        .recv_timeout(Duration::from_secs(5))
        .expect("a TCP connection to the port the browser named");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1\\FENCE (port {tcp_port})")), "{text}");
    assert!(text.contains("closed the connection during login"), "{text}");

    // An explicit port wins: no browser request, straight to the port.
    let (tcp_port, accepted) = recording_listener();
    let requests = sql_browser(bind().unwrap(), Some(1));
    let s = ConnectionString::parse(&format!("Server=127.0.0.1\\FENCE,{tcp_port};User ID=u;Password=p")).unwrap();
    assert_eq!(s.server(), format!("127.0.0.1:{tcp_port}"));
    let _ = s.connect().await.unwrap_err();
    accepted
        .recv_timeout(Duration::from_secs(5))
        .expect("a TCP connection to the explicit port");
    assert!(
        requests.recv_timeout(Duration::from_millis(300)).is_err(),
        "no browser request"
    );

    // A browser that does not answer: the instance is named in the error.
    let requests = sql_browser(bind().unwrap(), None);
    let s = ConnectionString::parse("Server=127.0.0.1\\NOPE;User ID=u;Password=p").unwrap();
    let err = s.connect().await.unwrap_err();
    assert!(requests.recv_timeout(Duration::from_secs(5)).is_ok());
    assert!(matches!(err, ConnectError::InstanceNotFound { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("127.0.0.1\\NOPE") && text.contains("UDP port 1434"),
        "{text}"
    );

    // With a live engine: the browser points at it, and the login completes.
    let Some(server_ado) = support::server_or_skip("named_instance_live") else {
        return;
    };
    let live = ConnectionString::parse(&server_ado).unwrap();
    let live_port: u16 = live.server().rsplit_once(':').unwrap().1.parse().unwrap();
    let _requests = sql_browser(bind().unwrap(), Some(live_port));
    let named = support::replace_ado_value(&server_ado, "server", "127.0.0.1\\FENCE");
    let mut conn = ConnectionString::parse(&named)
        .unwrap()
        .connect()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let row = conn
        .simple_query("SELECT 1;")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<i32, usize>(0), Some(1));
}

fn fencepost(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = support::binary::fencepost(args);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("run fencepost")
}

#[test]
fn the_cli_refuses_an_entra_id_method_it_cannot_honour_naming_the_token() {
    let output = fencepost(
        &[
            "status",
            "--connection",
            "Server=tcp:x.database.windows.net,1433;Database=app;Authentication=Active Directory Default",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("Authentication=Active Directory Default") && err.contains("FENCEPOST_ACCESS_TOKEN"),
        "{err}"
    );
}

#[test]
fn the_cli_refuses_a_token_beside_a_sql_login() {
    let output = fencepost(
        &["status", "--connection", "Server=tcp:127.0.0.1,1;User ID=u;Password=p"],
        &[("FENCEPOST_ACCESS_TOKEN", "tok")],
    );
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("User ID or Password"), "{err}");
}

#[test]
fn the_cli_signs_in_with_the_token_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "file-token-value\n").unwrap();
    let (port, rx) = tds_recorder();
    let connection = format!("Server=tcp:127.0.0.1,{port};Database=app;Encrypt=DANGER_PLAINTEXT");
    let output = fencepost(
        &[
            "status",
            "--connection",
            &connection,
            "--access-token-file",
            file.to_str().unwrap(),
        ],
        &[("FENCEPOST_ACCESS_TOKEN", "env-token-value")],
    );
    assert_eq!(output.status.code(), Some(2));
    let (_, payload) = rx.recv_timeout(Duration::from_secs(10)).expect("a login packet");
    let login = login7(&payload);
    assert!(login.extension && login.user_chars == 0);
    assert!(
        contains(&login.bytes, &utf16("file-token-value")),
        "the file wins over the variable"
    );
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!err.contains("file-token-value"), "the token leaked: {err}");
}

/// A listener whose accept queue is full: the kernel drops further SYNs, so
/// a connect to it hangs as one to a firewalled address does.
async fn full_listener() -> (tokio::net::TcpListener, Vec<std::net::TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    // Queued, never accepted: the queue holds one; the rest time out here.
    let fillers = (0..3)
        .filter_map(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok())
        .collect();
    (listener, fillers)
}

#[tokio::test]
async fn a_server_that_never_accepts_the_tcp_connection_is_a_connect_timeout_naming_the_address() {
    let (listener, _fillers) = full_listener().await;
    let port = listener.local_addr().unwrap().port();
    let s = ConnectionString::parse(&format!(
        "Server=tcp:127.0.0.1,{port};User ID=u;Password=p;Connect Timeout=1"
    ))
    .unwrap();
    let started = std::time::Instant::now();
    let err = s.connect().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(err, ConnectError::TimedOut { .. }), "{err:?}");
    assert_eq!(
        format!("{err:#}"),
        format!("127.0.0.1:{port} did not accept a TCP connection within 1s (check the address and the firewall)")
    );
}

#[test]
fn a_string_without_connect_timeout_waits_15_seconds() {
    let s = ConnectionString::parse("Server=tcp:db,1433;User ID=u;Password=p").unwrap();
    assert_eq!(s.connect_timeout(), Duration::from_secs(15));
    assert_eq!(fencepost::connection::DEFAULT_CONNECT_TIMEOUT, Duration::from_secs(15));
}
