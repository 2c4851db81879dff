//! How a [`Client`](super::Client) connects and how long it waits.

use std::future::Future;
use std::time::Duration;

use super::Error;
use super::token::{BoxError, TokenProvider};
use crate::connection::{ConnectionString, MAX_CONNECT_TIMEOUT};

/// The longest any of the client's timeouts is taken to be: a day, as for
/// `Connect Timeout`. A longer value (`Duration::MAX` for "for ever") is
/// taken as a day, which no call, checkout or release is meant to last, and
/// which keeps every deadline on the clock.
pub const MAX_TIMEOUT: Duration = MAX_CONNECT_TIMEOUT;

/// Settings for a [`Client`](super::Client). Setters take `&mut self` and
/// chain:
///
/// ```
/// # use std::time::Duration;
/// # use fencepost::{ClientConfig, ConnectionString};
/// let mut config = ClientConfig::new(ConnectionString::parse("Server=tcp:db,1433;User ID=svc;Password=x")?);
/// config.max_connections(2).call_timeout(Duration::from_secs(10));
/// # Ok::<(), fencepost::ConnectError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub(crate) connection_string: ConnectionString,
    pub(crate) max_connections: u32,
    pub(crate) signal_sessions: Option<u32>,
    pub(crate) call_timeout: Duration,
    pub(crate) checkout_timeout: Duration,
    pub(crate) release_timeout: Duration,
    pub(crate) cancel_grace: Duration,
    pub(crate) allow_privileged_login: bool,
    pub(crate) idle_check_after: Duration,
    pub(crate) idle_check_timeout: Duration,
    pub(crate) access_token_provider: Option<TokenProvider>,
}

impl ClientConfig {
    /// Defaults: at most 4 connections (and beside them the renewals' and the
    /// handover signal's, see [`max_connections`](Self::max_connections)), 30 s
    /// per round trip, 15 s to get a connection from the pool, 5 s for the
    /// release at the end of `run_fenced`, a pooled connection idle for more
    /// than 5 s checked before use with a ping of at most 2 s, and a
    /// privileged login refused by `verify_contract`.
    ///
    /// A procedure call as a whole takes at most `checkout_timeout` (getting
    /// a connection, idle checks and new connections included) plus
    /// `call_timeout` (its round trip), not `call_timeout` alone.
    pub fn new(connection_string: ConnectionString) -> Self {
        Self {
            connection_string,
            max_connections: 4,
            signal_sessions: None,
            call_timeout: Duration::from_secs(30),
            checkout_timeout: Duration::from_secs(15),
            release_timeout: Duration::from_secs(5),
            cancel_grace: Duration::from_secs(10),
            allow_privileged_login: false,
            idle_check_after: Duration::from_secs(5),
            idle_check_timeout: Duration::from_secs(2),
            access_token_provider: None,
        }
    }

    /// The most connections the pool opens for calls and fenced transactions
    /// (at least 1). `run_fenced` itself uses one ordinary connection at a
    /// time (its renewals stop before the publish).
    ///
    /// Beside them a client opens two kinds of sessions of its own, as they
    /// are needed. Renewal connections: one for each guard whose renewal is in
    /// flight at that moment, and one spare for a second attempt beside a slow
    /// one, at most 32 (one in steady use). So a guard keeps renewing while
    /// the service's own work holds all `max`, and a guard whose renewals hang
    /// holds two at most while the others renew. Handover signal sessions:
    /// two that every held guard's signal shares, however many guards, and
    /// one per waiting acquire while it waits, at most
    /// [`signal_sessions`](Self::signal_sessions) (by default `max(max,
    /// 4)`). A client opens at most `max + 32 + 2 + signal_sessions`
    /// sessions, and one that only holds leases `max + 32 + 2`.
    pub fn max_connections(&mut self, max: u32) -> &mut Self {
        self.max_connections = max.max(1);
        self
    }

    /// The most sessions the client's waiting acquires block on the handover
    /// signal on (at least 1; default `max(max_connections, 4)`): each
    /// `acquire_waiting` takes one while it waits, so beyond this many
    /// waiting at once the others poll, about half a second a handover
    /// instead of a few milliseconds. The client warns once when that
    /// happens, and the gauge `fencepost.signal.sessions` shows how many are
    /// in use. Each is a session on the server. The guards' own signals do
    /// not count here: every guard of a client holds its signal on two
    /// sessions they share.
    pub fn signal_sessions(&mut self, max: u32) -> &mut Self {
        self.signal_sessions = Some(max.max(1));
        self
    }

    /// How long one procedure call may take from sending the request to the
    /// last byte of the reply, `verify_contract` included. A call that runs
    /// out reports a network error (for a publish:
    /// [`Error::OutcomeUnknown`](super::Error::OutcomeUnknown)). Getting the
    /// connection comes before it, bounded by `checkout_timeout`. The driver's
    /// own command timeout is set 5 s past it, so a value above the driver's
    /// default 30 s is honoured; that is the only bound on each statement of
    /// a fenced transaction, which the client does not time as a whole.
    ///
    /// At most [`MAX_TIMEOUT`] (a day): a longer value is taken as a day.
    /// Zero is refused by [`Client::connect_with`](super::Client::connect_with)
    /// ([`Error::InvalidConfig`](super::Error::InvalidConfig)): no reply
    /// arrives in no time, so every call would fail after it may have been
    /// sent, and every publish would be unknown.
    pub fn call_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.call_timeout = timeout.min(MAX_TIMEOUT);
        self
    }

    /// How long to wait for a connection before giving up without sending
    /// anything: for a free one, for the idle checks of those that sat idle,
    /// and for a new one to open. A caller that gives up while connections
    /// keep failing gets [`Error::Unavailable`](super::Error::Unavailable)
    /// with the last failure's reason.
    ///
    /// At most [`MAX_TIMEOUT`] (a day): a longer value is taken as a day.
    /// Zero is refused by [`Client::connect_with`](super::Client::connect_with)
    /// ([`Error::InvalidConfig`](super::Error::InvalidConfig)): even a free
    /// connection takes a moment to hand out, so no call could start.
    pub fn checkout_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.checkout_timeout = timeout.min(MAX_TIMEOUT);
        self
    }

    /// Lets [`verify_contract`](super::Client::verify_contract) pass for a
    /// login that may write the fence table directly (it holds UPDATE on
    /// `fence.Resource`, or enters as `dbo`), which it otherwise refuses: a
    /// lease taken with such a login fences nothing. For tools and demos that
    /// run as the deploy login, never for a service.
    pub fn allow_privileged_login(&mut self, allow: bool) -> &mut Self {
        self.allow_privileged_login = allow;
        self
    }

    /// How long `run_fenced` waits for its closing release; a release that
    /// does not finish in time is logged and the lease simply expires. The
    /// same bound holds for the background release of a dropped guard.
    ///
    /// At most [`MAX_TIMEOUT`] (a day): a longer value is taken as a day.
    /// Zero is accepted and means "do not wait": the release is started and
    /// abandoned at once, so it may or may not land, and otherwise the lease
    /// expires on its own.
    pub fn release_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.release_timeout = timeout.min(MAX_TIMEOUT);
        self
    }

    /// How long `run_fenced` waits for a work it cancelled to stop before it
    /// drops the work and returns `Lost` (default 10 s). A work that ignores
    /// its token would otherwise keep `run_fenced` waiting for ever.
    ///
    /// At most [`MAX_TIMEOUT`] (a day): a longer value is taken as a day.
    /// Zero is accepted: a cancelled work is dropped at once, without a
    /// chance to wind down.
    pub fn cancel_grace(&mut self, grace: Duration) -> &mut Self {
        self.cancel_grace = grace.min(MAX_TIMEOUT);
        self
    }

    /// Signs every new connection in with a Microsoft Entra ID access token
    /// that `provider` returns at that moment, instead of one fixed token: a
    /// token lasts about an hour and the pool opens connections for as long
    /// as the service runs (it replaces each one within 30 minutes), so a
    /// token given once stops working. The connection string then has no
    /// User ID or Password.
    ///
    /// The provider is called once per new connection, never on the path of
    /// a call that finds a pooled connection; it may take up to the string's
    /// `Connect Timeout`. Cache inside it if fetching is costly (the
    /// credentials of `azure_identity` cache and refresh their tokens
    /// themselves). Its error becomes
    /// [`ConnectError::AccessTokenProvider`](crate::ConnectError::AccessTokenProvider)
    /// with the error as its source: from [`Client::connect_with`](super::Client::connect_with),
    /// or as the reason of an [`Error::Unavailable`](super::Error::Unavailable)
    /// once the client runs.
    ///
    /// ```no_run
    /// # use fencepost::{ClientConfig, ConnectionString};
    /// # async fn fetch_token() -> Result<String, std::io::Error> { unimplemented!() }
    /// let mut config = ClientConfig::new(ConnectionString::parse("Server=tcp:x.database.windows.net,1433;Database=app")?);
    /// // e.g. azure_identity: credential.get_token(&["https://database.windows.net/.default"], None)
    /// config.access_token_provider(|| async { fetch_token().await });
    /// # Ok::<(), fencepost::ConnectError>(())
    /// ```
    pub fn access_token_provider<F, Fut, E>(&mut self, provider: F) -> &mut Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.access_token_provider = Some(TokenProvider::new(provider));
        self
    }

    /// How long a pooled connection may sit idle before it is checked with a
    /// `SELECT 1` on its next use (default 5 s). A server restart or failover
    /// leaves idle connections dead; without the check the first call on each
    /// would fail, and a publish would report `OutcomeUnknown` for a request
    /// that never arrived. Connections in steady use are not checked, so
    /// the check does not cover everything: a connection used within the
    /// last `idle_check_after` when the server restarts fails on its first
    /// call (retry a publish with the same operation id).
    ///
    /// At most [`MAX_TIMEOUT`] (a day): a longer value is taken as a day, and
    /// no connection lives that long anyway (the pool replaces each one
    /// within 30 minutes). Zero is accepted: every pooled connection is
    /// checked before each use, which costs a round trip per call.
    pub fn idle_check_after(&mut self, after: Duration) -> &mut Self {
        self.idle_check_after = after.min(MAX_TIMEOUT);
        self
    }

    /// How long the idle check's `SELECT 1` may take (default 2 s, never more
    /// than `call_timeout`). A connection that does not answer in time is
    /// replaced. After a failover pooled connections are often half-open (no
    /// reply and no reset), and each would otherwise hold the call for a
    /// whole `call_timeout`; once one fails its check, the others that were
    /// idle since before are replaced without a check.
    ///
    /// At most [`MAX_TIMEOUT`] (a day): a longer value is taken as a day.
    /// Zero is refused by [`Client::connect_with`](super::Client::connect_with)
    /// ([`Error::InvalidConfig`](super::Error::InvalidConfig)): no connection
    /// could pass the check, so none would be used again once idle.
    pub fn idle_check_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.idle_check_timeout = timeout.min(MAX_TIMEOUT);
        self
    }

    /// Refuses the settings no client can honour: a bound of zero on a round
    /// trip or a checkout.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let zero = [
            ("call_timeout", self.call_timeout),
            ("checkout_timeout", self.checkout_timeout),
            ("idle_check_timeout", self.idle_check_timeout),
        ];
        match zero.into_iter().find(|(_, value)| value.is_zero()) {
            Some((setting, _)) => Err(Error::InvalidConfig {
                setting,
                reason: "must be more than zero: nothing can answer in no time",
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Client;
    use crate::client::Error;
    use crate::connection::stand_in::{Answer, StandIn};

    fn config(ado: &str) -> ClientConfig {
        ClientConfig::new(ConnectionString::parse(ado).unwrap())
    }

    #[tokio::test]
    async fn a_call_under_an_endless_call_timeout_answers_without_a_panic() {
        let stand_in = StandIn::start(Answer::FailEachRequest {
            number: 2812,
            message: "Could not find stored procedure 'fence_api.Inspect'.",
        })
        .await;
        let mut config = config(&stand_in.ado("User ID=u;Password=p;Database=app"));
        config.call_timeout(Duration::MAX);
        let client = Client::connect_with(config).await.unwrap();
        match client.inspect("k").await {
            Err(Error::Server { number: 2812, .. }) => {}
            other => panic!("expected the stand-in's 2812, got {other:?}"),
        }
        assert_eq!(client.config().call_timeout, MAX_TIMEOUT);
    }

    #[test]
    fn every_timeout_longer_than_a_day_is_taken_as_a_day() {
        let mut config = config("Server=tcp:db,1433;User ID=u;Password=p");
        config
            .call_timeout(Duration::MAX)
            .checkout_timeout(Duration::MAX)
            .release_timeout(Duration::MAX)
            .cancel_grace(Duration::MAX)
            .idle_check_after(Duration::MAX)
            .idle_check_timeout(Duration::MAX);
        let taken = [
            config.call_timeout,
            config.checkout_timeout,
            config.release_timeout,
            config.cancel_grace,
            config.idle_check_after,
            config.idle_check_timeout,
        ];
        assert_eq!(taken, [MAX_TIMEOUT; 6]);
        config.call_timeout(MAX_TIMEOUT - Duration::from_secs(1));
        assert_eq!(config.call_timeout, MAX_TIMEOUT - Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_zero_bound_on_a_round_trip_or_a_checkout_is_refused_naming_the_setting() {
        type Setter = fn(&mut ClientConfig, Duration) -> &mut ClientConfig;
        let refused: [(&str, Setter); 3] = [
            ("call_timeout", ClientConfig::call_timeout),
            ("checkout_timeout", ClientConfig::checkout_timeout),
            ("idle_check_timeout", ClientConfig::idle_check_timeout),
        ];
        // Nothing listens here: a refusal must come before any connection.
        let ado = "Server=tcp:127.0.0.1,1;User ID=u;Password=p;Encrypt=DANGER_PLAINTEXT";
        for (name, set) in refused {
            let mut config = config(ado);
            set(&mut config, Duration::ZERO);
            match Client::connect_with(config).await {
                Err(error @ Error::InvalidConfig { setting, .. }) => {
                    assert_eq!(setting, name);
                    assert!(
                        error
                            .to_string()
                            .starts_with(&format!("ClientConfig::{name} must be more than zero"))
                    );
                    assert!(!error.is_transient());
                }
                other => panic!("{name}(0): expected InvalidConfig, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_zero_release_timeout_grace_or_idle_threshold_is_accepted() {
        let stand_in = StandIn::start(Answer::FailEachRequest {
            number: 2812,
            message: "Could not find stored procedure.",
        })
        .await;
        let mut config = config(&stand_in.ado("User ID=u;Password=p;Database=app"));
        config
            .release_timeout(Duration::ZERO)
            .cancel_grace(Duration::ZERO)
            .idle_check_after(Duration::ZERO);
        let client = Client::connect_with(config).await.unwrap();
        assert_eq!(client.config().release_timeout, Duration::ZERO);
        assert_eq!(client.config().cancel_grace, Duration::ZERO);
        assert_eq!(client.config().idle_check_after, Duration::ZERO);
    }
}
