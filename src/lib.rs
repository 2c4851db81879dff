//! fencepost: fenced leases on SQL Server.
//!
//! A lease can expire while the code that took it still runs; the old holder
//! resumes and overwrites its successor's result. fencepost puts the fence
//! where the write lands: ownership (a generation raised by every acquisition,
//! an owner id and an expiry on the server clock) lives in the same row as the
//! protected result, and a publish is a conditional update that the database
//! refuses unless the caller still owns the current, unexpired generation.
//!
//! The crate's rooms, and the cargo feature each needs:
//! - [`client`] (always built): the typed API services use, which calls only
//!   the procedures: the lease guard, `run_fenced`, fenced transactions,
//!   tracing spans, metrics with feature `metrics`, and with feature `fake`
//!   `Client::fake()`, the same client on the model for a service's tests;
//! - [`connection`] (always built): opening a connection from an ADO.NET
//!   string or a JDBC URL;
//! - [`deploy`](mod@deploy) (feature `deploy`): the runner behind `fencepost migrate`,
//!   `status` and `script`, with [`source`](mod@source), the T-SQL it deploys (migrations,
//!   procedures, permissions) embedded in the crate or read from a folder;
//! - [`audit`](mod@audit) (feature `audit`): `fencepost check`, which proves nothing else
//!   can write the fence;
//! - [`bench`](mod@bench) (feature `bench`): `fencepost bench`, the lease calls measured
//!   beside what a user would run instead;
//! - [`selftest`](mod@selftest) (feature `selftest`, which turns on `bench`):
//!   `fencepost selftest`, the fence's behaviours run as forced schedules on
//!   the user's own engine;
//! - [`artifact`](mod@artifact) (feature `artifacts`): results too big for a row, uploaded
//!   create-only to an object store and published as a pointer through the fence;
//! - [`model`](mod@model) (feature `model`): the procedure contract as a pure state
//!   machine, with the server's clock supplied by the caller.
//!
//! [`schema`] (the names of fencepost's objects) and [`identity`](mod@identity) (the
//! database identity, feature `deploy`) hold what several rooms share.
//!
//! The default features (`cli`, `metrics`, `artifacts`) are what the
//! `fencepost` command needs, so `cargo install fencepost` builds it. A
//! service that only holds leases builds the client alone, without the
//! command line, the deploy runner, the audit or an object store's HTTP stack:
//!
//! ```toml
//! fencepost = { version = "0.1", default-features = false, features = ["metrics"] }
//! ```
//!
//! # A service holding a lease
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use fencepost::client::{Fenced, Provision};
//! use fencepost::Client;
//!
//! # async fn rebuild(stop: fencepost::CancellationToken) -> Result<String, std::io::Error> { Ok(String::new()) }
//! # async fn service() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect("Server=tcp:db,1433;Database=app;User ID=svc;Password=...;Encrypt=true").await?;
//! client.verify_contract().await?;
//! let _: Provision = client.provision("report:daily").await?;
//!
//! // Renewed every ~10 s while `rebuild` runs; cancelled if the lease is lost.
//! match client.run_fenced("report:daily", Duration::from_secs(30), rebuild).await? {
//!     Fenced::Published { generation, .. } => println!("published under generation {generation}"),
//!     Fenced::Refused(reason) => println!("the fence refused the result: {reason}"),
//!     Fenced::Lost(reason) => println!("lease lost, nothing published: {reason}"),
//!     Fenced::Failed(error) => println!("the rebuild failed: {error}"),
//!     Fenced::Busy { until } => println!("someone else holds it until {until}"),
//!     Fenced::NotProvisioned => unreachable!("provisioned above"),
//!     // The publish may have committed; `settle` gives the final answer.
//!     Fenced::Unknown(unsettled) => println!("settled: {:?}", client.settle(&unsettled).await?),
//!     other => println!("{other:?}"),
//! }
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]
// A type a user is handed must be one they can name (store it, write a
// function that takes it): every public type has a public path.
#![warn(unnameable_types)]
// `pub` says "part of the API": an item no user can reach is `pub(crate)`,
// so what a change may break can be read off its declaration.
#![warn(unreachable_pub)]
// docs.rs builds with `--cfg docsrs` (Cargo.toml) and marks each
// feature-gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The client (with `connection`, `schema` and `tsql`) is always built: it is
// what a service links. Each other room is a feature of its own (Cargo.toml).
#[cfg(feature = "artifacts")]
#[cfg_attr(docsrs, doc(cfg(feature = "artifacts")))]
pub mod artifact;
#[cfg(feature = "audit")]
#[cfg_attr(docsrs, doc(cfg(feature = "audit")))]
pub mod audit;
#[cfg(feature = "bench")]
#[cfg_attr(docsrs, doc(cfg(feature = "bench")))]
pub mod bench;
pub mod client;
pub mod connection;
#[cfg(feature = "deploy")]
#[cfg_attr(docsrs, doc(cfg(feature = "deploy")))]
pub mod deploy;
#[cfg(feature = "deploy")]
#[cfg_attr(docsrs, doc(cfg(feature = "deploy")))]
pub mod identity;
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub mod model;
pub mod schema;
#[cfg(feature = "selftest")]
#[cfg_attr(docsrs, doc(cfg(feature = "selftest")))]
pub mod selftest;
#[cfg(feature = "deploy")]
#[cfg_attr(docsrs, doc(cfg(feature = "deploy")))]
pub mod source;
mod tsql;

#[cfg(test)]
mod says_once;

pub use client::{Client, ClientConfig};
pub use connection::{ConnectError, Connection, ConnectionString};
/// The driver whose types the API hands out ([`tiberius::Row`] from a
/// fenced transaction's query, [`tiberius::ToSql`] for its parameters, the
/// [`Connection`] of the deploy runner), re-exported so a user names the
/// same version this crate was built with.
pub use tiberius;
/// The token `run_fenced` hands the work and [`client::LeaseGuard::token`]
/// returns, cancelled when the lease is lost: re-exported so a service needs
/// no dependency of its own on tokio-util to name it.
pub use tokio_util::sync::CancellationToken;
