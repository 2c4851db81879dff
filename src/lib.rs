//! fencepost: fenced leases on SQL Server.
//!
//! A lease can expire while the code that took it still runs; the old holder
//! resumes and overwrites its successor's result. fencepost puts the fence
//! where the write lands: ownership (a generation raised by every acquisition,
//! an owner id and an expiry on the server clock) lives in the same row as the
//! protected result, and a publish is a conditional update that the database
//! refuses unless the caller still owns the current, unexpired generation.
//!
//! The crate has three rooms:
//! - [`deploy`]: the T-SQL (migrations, procedures, permissions) embedded in
//!   the binary, and the runner behind `fencepost migrate`, `status` and `script`;
//! - `client`: the typed API services use, which calls only the procedures;
//! - `audit`: `fencepost check`, which proves nothing else can write the fence.
#![warn(missing_docs)]

pub mod audit;
pub mod connection;
pub mod deploy;

pub use connection::{ConnectError, Connection, ConnectionString};
