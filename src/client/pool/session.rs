//! A pooled connection and what the pool must know of it.

use tokio::time::Instant;

use crate::connection::Connection;

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
