//! A small bb8 connection manager for tiberius 0.13. The published bb8 and
//! deadpool adapters pin tiberius 0.12, whose `Client` is a different type.

mod last_error;

use std::time::Duration;

use tokio::time::Instant;

use super::config::ClientConfig;
use crate::connection::{ConnectError, Connection, ConnectionString};

pub(crate) use last_error::LastConnectError;

/// What the driver's own per-round-trip timeout adds to `call_timeout`.
const DRIVER_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

/// A pooled connection and whether a call on it was left unfinished.
pub(crate) struct Session {
    pub(crate) connection: Connection,
    /// Set before a request is written and cleared once its reply is read in
    /// full. A call dropped half way (a timeout, a cancelled task) leaves it
    /// set, and the pool then discards the connection instead of handing a
    /// half-read reply to the next caller.
    pub(crate) in_call: bool,
    /// When a call last finished on this connection (or it was opened). A
    /// connection idle for longer than `ClientConfig::idle_check_after` is
    /// checked before use: a server restart or failover leaves every pooled
    /// connection dead, and a publish sent on one would fail as
    /// `OutcomeUnknown` although it never reached the server.
    pub(crate) last_used: Instant,
}

/// Opens sessions for the pool. Validation on check-out is off (see
/// `Client::connect_with`), so `is_valid` is never on the path of a lease call.
pub(crate) struct Manager {
    pub(crate) connection_string: ConnectionString,
    last_connect_error: LastConnectError,
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
    pub(crate) fn new(config: &ClientConfig, last_connect_error: LastConnectError) -> Self {
        let mut connection_string = config.connection_string.clone();
        connection_string.set_command_timeout(Some(config.call_timeout.saturating_add(DRIVER_TIMEOUT_MARGIN)));
        Self {
            connection_string,
            last_connect_error,
        }
    }
}

/// A pool of at most `size` connections opened by `manager`, handing out a
/// connection within `checkout_timeout` or giving up.
pub(crate) fn build(config: &ClientConfig, size: u32, manager: Manager) -> bb8::Pool<Manager> {
    bb8::Pool::builder()
        .max_size(size)
        // Validating on check-out would add a round trip to every lease
        // call; a connection whose last call broke is discarded instead.
        .test_on_check_out(false)
        .connection_timeout(config.checkout_timeout)
        // No error sink: each attempt records its own failure (see
        // `Manager::connect`), also while bb8 is still retrying.
        .build_unchecked(manager)
}

impl bb8::ManageConnection for Manager {
    type Connection = Session;
    type Error = ConnectError;

    async fn connect(&self) -> Result<Session, ConnectError> {
        let connection = match self.connection_string.connect().await {
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
        let server = self.connection_string.server();
        ping(&mut session.connection)
            .await
            .map_err(|driver| ConnectError::Other { server, driver })
    }

    fn has_broken(&self, session: &mut Session) -> bool {
        session.in_call
    }
}

/// One `SELECT 1` round trip.
pub(crate) async fn ping(connection: &mut Connection) -> Result<(), tiberius::error::Error> {
    connection.simple_query("SELECT 1").await?.into_results().await?;
    Ok(())
}

/// Whether a connection idle since `last_used` must be checked before use.
pub(crate) fn needs_check(last_used: Instant, now: Instant, idle_check_after: Duration) -> bool {
    now.saturating_duration_since(last_used) > idle_check_after
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

    #[test]
    fn the_driver_timeout_is_later_than_a_call_timeout_above_thirty_seconds() {
        let manager = Manager::new(&config(Duration::from_secs(90)), LastConnectError::default());
        let driver = manager.connection_string.command_timeout().expect("a backstop stays");
        assert!(driver > Duration::from_secs(90), "{driver:?}");
        assert_eq!(driver, Duration::from_secs(95));
    }

    #[test]
    fn the_driver_timeout_follows_a_short_call_timeout_too() {
        let manager = Manager::new(&config(Duration::from_secs(2)), LastConnectError::default());
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
        let pool = build(&config, 2, Manager::new(&config, last.clone()));
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

    #[test]
    fn only_a_connection_idle_past_the_threshold_is_checked() {
        let start = Instant::now();
        let after = Duration::from_secs(5);
        assert!(!needs_check(start, start, after));
        assert!(!needs_check(start, start + after, after));
        assert!(needs_check(start, start + after + Duration::from_millis(1), after));
    }
}
