//! TCP settings for every connection. After a failover or a network cut the
//! old connections can stay half-open: no FIN or RST ever arrives, and a
//! pooled connection looks alive until a call on it waits out its timeout.
//! Keepalive probes find such a connection while it sits idle, and on Linux
//! TCP_USER_TIMEOUT ends one whose request is never acknowledged, so the
//! kernel reports the loss rather than leaving it to the caller's timeout.

use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};
use tokio::net::TcpStream;

/// Idle time before the first probe.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(15);
/// Time between unanswered probes.
#[cfg(any(target_os = "linux", target_os = "android"))]
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// Unanswered probes before the connection is dropped: a dead peer is found
/// within about 30 s of idleness.
#[cfg(any(target_os = "linux", target_os = "android"))]
const KEEPALIVE_RETRIES: u32 = 3;
/// How long sent data may stay unacknowledged. The server's TCP stack
/// acknowledges a request at once, however long the statement runs, so this
/// only ends connections whose peer is gone.
#[cfg(any(target_os = "linux", target_os = "android"))]
const USER_TIMEOUT: Duration = Duration::from_secs(30);

/// Sets nodelay (a request is one small write) and the half-open defences.
/// A setting the platform refuses is logged and skipped: the connection still
/// works, and the client's own timeouts still bound every call.
pub(crate) fn tune(tcp: &TcpStream) {
    let _ = tcp.set_nodelay(true);
    let socket = SockRef::from(tcp);
    let keepalive = TcpKeepalive::new().with_time(KEEPALIVE_IDLE);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let keepalive = keepalive
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    if let Err(error) = socket.set_tcp_keepalive(&keepalive) {
        tracing::debug!(%error, "TCP keepalive could not be set");
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(error) = socket.set_tcp_user_timeout(Some(USER_TIMEOUT)) {
        tracing::debug!(%error, "TCP_USER_TIMEOUT could not be set");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_connection_probes_its_peer_while_idle() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        tune(&tcp);
        let socket = SockRef::from(&tcp);
        assert!(socket.keepalive().unwrap());
        assert!(tcp.nodelay().unwrap());
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            assert_eq!(socket.tcp_keepalive_time().unwrap(), KEEPALIVE_IDLE);
            assert_eq!(socket.tcp_user_timeout().unwrap(), Some(USER_TIMEOUT));
            assert_eq!(socket.tcp_keepalive_retries().unwrap(), KEEPALIVE_RETRIES);
        }
    }
}
