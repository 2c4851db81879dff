//! The only code that talks to the server while deploying: the session, the
//! state read, the deploy lock, migrations, procedures, the last request of
//! permission scripts, role memberships, and [`migrate`], which orders them
//! over a [`Target`](target::Target).

mod grants;
mod lock;
mod migrate;
mod migrations;
mod options;
mod permissions;
mod procedures;
mod read;
mod session;
mod target;

pub use grants::{Grant, GrantOutcome, ensure_members, refuse_deploying_user};
pub use migrate::migrate;
pub(crate) use migrate::read_plan;
pub use options::{DEFAULT_MIGRATION_LOCK_TIMEOUT, MigrateOptions, Progress};
pub(crate) use session::Session;
