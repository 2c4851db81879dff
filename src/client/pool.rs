//! A small bb8 connection manager for tiberius 0.13. The published bb8 and
//! deadpool adapters pin tiberius 0.12, whose `Client` is a different type.

mod idle_check;
mod last_error;
mod session;

use std::time::Duration;

use tokio::time::Instant;

use super::config::ClientConfig;
use super::token::TokenProvider;
use crate::connection::{ConnectError, Connection, ConnectionString};

pub(crate) use idle_check::IdleCheck;
pub(crate) use last_error::LastConnectError;
pub(crate) use session::Session;

/// What the driver's own per-round-trip timeout adds to `call_timeout`.
const DRIVER_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

/// The idle check `config` describes, fresh (nothing learnt yet).
pub(crate) fn idle_check(config: &ClientConfig) -> IdleCheck {
    IdleCheck::new(
        config.idle_check_after,
        config.idle_check_timeout.min(config.call_timeout),
    )
}

/// Opens sessions for the pool, and checks on check-out those that sat idle
/// (see [`IdleCheck`]); a connection in steady use passes without a round
/// trip.
pub(crate) struct Manager {
    pub(crate) connection_string: ConnectionString,
    access_token_provider: Option<TokenProvider>,
    last_connect_error: LastConnectError,
    idle_check: IdleCheck,
}

impl Manager {
    /// The connection string of `config`, with tiberius's own command timeout
    /// (30 s unless the string says otherwise) set to `call_timeout` plus a
    /// margin. The client bounds each procedure call itself, so the driver's
    /// timeout must never fire first: it would cut a call that the caller
    /// allowed more than 30 s. It stays as a backstop, a little later than
    /// the client's own bound, for the statements of a fenced transaction,
    /// which the client does not time, so that no statement can hold a pooled
    /// connection for ever.
    pub(crate) fn new(config: &ClientConfig, last_connect_error: LastConnectError, idle_check: IdleCheck) -> Self {
        let mut connection_string = config.connection_string.clone();
        connection_string.set_command_timeout(Some(config.call_timeout.saturating_add(DRIVER_TIMEOUT_MARGIN)));
        Self {
            connection_string,
            access_token_provider: config.access_token_provider.clone(),
            last_connect_error,
            idle_check,
        }
    }
}

impl Manager {
    /// One connection, signed in with a token fetched for it when the
    /// configuration has a provider.
    async fn open(&self) -> Result<Connection, ConnectError> {
        let Some(provider) = &self.access_token_provider else {
            return self.connection_string.connect().await;
        };
        let token = provider
            .token(self.connection_string.connect_timeout())
            .await
            .map_err(|source| ConnectError::AccessTokenProvider {
                server: self.connection_string.server(),
                source,
            })?;
        let mut signed = self.connection_string.clone();
        signed.set_access_token(&token)?;
        signed.connect().await
    }
}

/// A pool of at most `size` connections opened by `manager`, handing out a
/// connection within `checkout_timeout` or giving up.
pub(crate) fn build(config: &ClientConfig, size: u32, manager: Manager) -> bb8::Pool<Manager> {
    bb8::Pool::builder()
        .max_size(size)
        // `is_valid` is the idle check: no round trip for a connection in
        // steady use, and bb8 replaces one that fails it within the same
        // `checkout_timeout`. A connection whose last call broke is
        // discarded when it comes back instead (`has_broken`).
        .test_on_check_out(true)
        .connection_timeout(config.checkout_timeout)
        // No error sink: each attempt records its own failure (see
        // `Manager::connect`), also while bb8 is still retrying.
        .build_unchecked(manager)
}

impl bb8::ManageConnection for Manager {
    type Connection = Session;
    type Error = ConnectError;

    async fn connect(&self) -> Result<Session, ConnectError> {
        let connection = match self.open().await {
            Ok(connection) => connection,
            Err(error) => {
                self.last_connect_error.record(&error);
                return Err(error);
            }
        };
        self.last_connect_error.clear();
        Ok(Session {
            connection,
            in_call: false,
            last_used: Instant::now(),
        })
    }

    async fn is_valid(&self, session: &mut Session) -> Result<(), ConnectError> {
        self.idle_check.check(session).await.map_err(|reason| {
            tracing::debug!("replacing an idle connection: {reason}");
            ConnectError::Other {
                server: self.connection_string.server(),
                driver: tiberius::error::Error::Io {
                    kind: std::io::ErrorKind::TimedOut,
                    message: reason,
                },
            }
        })
    }

    fn has_broken(&self, session: &mut Session) -> bool {
        session.in_call
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(call_timeout: Duration) -> ClientConfig {
        let mut config =
            ClientConfig::new(ConnectionString::parse("Server=tcp:db,1433;User ID=svc;Password=x").unwrap());
        config.call_timeout(call_timeout);
        config
    }

    fn manager(config: &ClientConfig) -> Manager {
        Manager::new(config, LastConnectError::default(), idle_check(config))
    }

    #[test]
    fn the_driver_timeout_is_later_than_a_call_timeout_above_thirty_seconds() {
        let manager = manager(&config(Duration::from_secs(90)));
        let driver = manager.connection_string.command_timeout().expect("a backstop stays");
        assert!(driver > Duration::from_secs(90), "{driver:?}");
        assert_eq!(driver, Duration::from_secs(95));
    }

    #[test]
    fn the_driver_timeout_follows_a_short_call_timeout_too() {
        let manager = manager(&config(Duration::from_secs(2)));
        assert_eq!(
            manager.connection_string.command_timeout(),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn the_driver_timeout_without_the_client_is_thirty_seconds() {
        // What the fix is about: the driver's own default would cut a longer call.
        let plain = ConnectionString::parse("Server=tcp:db,1433;User ID=svc;Password=x").unwrap();
        assert_eq!(plain.command_timeout(), Some(Duration::from_secs(30)));
    }

    #[tokio::test]
    async fn every_waiter_that_times_out_hears_why_connections_fail() {
        use crate::connection::stand_in::{Answer, StandIn};
        let stand_in = StandIn::start(Answer::Refuse {
            number: 40613,
            message: "Database 'app' on server 'db' is not currently available.",
        })
        .await;
        let mut config =
            ClientConfig::new(ConnectionString::parse(&stand_in.ado("User ID=u;Password=p;Database=app")).unwrap());
        config.checkout_timeout(Duration::from_millis(400));
        let last = LastConnectError::default();
        let pool = build(&config, 2, Manager::new(&config, last.clone(), idle_check(&config)));
        let (a, b) = tokio::join!(
            super::super::call::checkout(&pool, &last, &config),
            super::super::call::checkout(&pool, &last, &config)
        );
        for result in [a.map(drop), b.map(drop)] {
            match result {
                Err(crate::client::Error::Unavailable { reason }) => assert!(
                    reason.contains("not currently available") && reason.contains("40613"),
                    "{reason}"
                ),
                other => panic!("expected Unavailable, got {other:?}"),
            }
        }
        assert!(stand_in.logins() >= 1);
    }

    #[tokio::test]
    async fn each_new_connection_signs_in_with_a_token_fetched_for_it() {
        use crate::connection::stand_in::{Answer, StandIn};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let stand_in = StandIn::start(Answer::Refuse {
            number: 18456,
            message: "Login failed for user '<token-identified principal>'.",
        })
        .await;
        let mut config = ClientConfig::new(
            ConnectionString::parse(&stand_in.ado("Database=app;Authentication=ActiveDirectoryAccessToken")).unwrap(),
        );
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        config.access_token_provider(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok::<_, std::io::Error>(format!("token-{n}")) }
        });
        let manager = manager(&config);
        for attempt in 0..3 {
            let err = bb8::ManageConnection::connect(&manager).await.err().unwrap();
            assert!(matches!(err, ConnectError::TokenRefused { .. }), "{err:?}");
            assert_eq!(calls.load(Ordering::SeqCst), attempt + 1, "one token per connection");
            assert!(stand_in.login_carries(attempt, &format!("token-{}", attempt + 1)));
        }
        assert_eq!(stand_in.logins(), 3);
    }

    #[tokio::test]
    async fn a_failing_token_provider_reaches_the_caller_with_its_cause() {
        use crate::connection::stand_in::{Answer, StandIn};
        let stand_in = StandIn::start(Answer::Refuse {
            number: 18456,
            message: "unused",
        })
        .await;
        let mut config = ClientConfig::new(ConnectionString::parse(&stand_in.ado("Database=app")).unwrap());
        config
            .access_token_provider(|| async { Err::<String, _>(std::io::Error::other("IMDS answered 500")) })
            .checkout_timeout(Duration::from_millis(300));

        // At start-up: a typed error whose source is the provider's.
        let err = crate::Client::connect_with(config.clone()).await.unwrap_err();
        let chain = format!("{:#}", anyhow::Error::from(err));
        assert!(
            chain.contains("access token provider") && chain.contains("IMDS answered 500"),
            "{chain}"
        );

        // Once running: the reason a waiter that gives up is told.
        let last = LastConnectError::default();
        let pool = build(&config, 1, Manager::new(&config, last.clone(), idle_check(&config)));
        match super::super::call::checkout(&pool, &last, &config).await.map(drop) {
            Err(crate::client::Error::Unavailable { reason }) => assert!(
                reason.contains("access token provider") && reason.contains("IMDS answered 500"),
                "{reason}"
            ),
            other => panic!("expected Unavailable, got {other:?}"),
        }
        assert_eq!(stand_in.logins(), 0, "nothing was sent without a token");
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_provider_that_never_answers_is_bounded_by_the_connect_timeout() {
        let mut config =
            ClientConfig::new(ConnectionString::parse("Server=tcp:127.0.0.1,1;Connect Timeout=3").unwrap());
        config.access_token_provider(std::future::pending::<Result<String, std::io::Error>>);
        let manager = manager(&config);
        let started = Instant::now();
        let err = bb8::ManageConnection::connect(&manager).await.err().unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        let chain = format!("{:#}", anyhow::Error::from(err));
        assert!(chain.contains("no token within 3 s"), "{chain}");
    }
}
