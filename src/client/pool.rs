//! A small bb8 connection manager for tiberius 0.13. The published bb8 and
//! deadpool adapters pin tiberius 0.12, whose `Client` is a different type.

use std::sync::{Arc, Mutex};

use crate::connection::{ConnectError, Connection, ConnectionString};

/// A pooled connection and whether a call on it was left unfinished.
pub(crate) struct Session {
    pub(crate) connection: Connection,
    /// Set before a request is written and cleared once its reply is read in
    /// full. A call dropped half way (a timeout, a cancelled task) leaves it
    /// set, and the pool then discards the connection instead of handing a
    /// half-read reply to the next caller.
    pub(crate) in_call: bool,
}

/// Opens sessions for the pool. Validation on check-out is off (see
/// `Client::connect_with`), so `is_valid` is never on the path of a lease call.
pub(crate) struct Manager {
    pub(crate) connection_string: ConnectionString,
}

impl bb8::ManageConnection for Manager {
    type Connection = Session;
    type Error = ConnectError;

    async fn connect(&self) -> Result<Session, ConnectError> {
        let connection = self.connection_string.connect().await?;
        Ok(Session {
            connection,
            in_call: false,
        })
    }

    async fn is_valid(&self, session: &mut Session) -> Result<(), ConnectError> {
        let server = self.connection_string.server();
        let reply = async {
            session
                .connection
                .simple_query("SELECT 1")
                .await?
                .into_results()
                .await?;
            Ok::<_, tiberius::error::Error>(())
        };
        reply.await.map_err(|source| ConnectError::Other { server, source })
    }

    fn has_broken(&self, session: &mut Session) -> bool {
        session.in_call
    }
}

/// Keeps the last failure to open a connection: bb8 reports only "timed out"
/// to the caller waiting for a connection, and the operator needs the reason.
#[derive(Clone, Default)]
pub(crate) struct LastConnectError(Arc<Mutex<Option<String>>>);

impl LastConnectError {
    pub(crate) fn take(&self) -> Option<String> {
        self.0.lock().map(|mut last| last.take()).unwrap_or(None)
    }
}

impl std::fmt::Debug for LastConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LastConnectError")
    }
}

impl bb8::ErrorSink<ConnectError> for LastConnectError {
    fn sink(&self, error: ConnectError) {
        if let Ok(mut last) = self.0.lock() {
            *last = Some(error.to_string());
        }
    }

    fn boxed_clone(&self) -> Box<dyn bb8::ErrorSink<ConnectError>> {
        Box::new(self.clone())
    }
}
