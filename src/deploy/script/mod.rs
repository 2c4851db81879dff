//! `fencepost script`: the deployment rendered as text, without a server. The
//! sqlcmd script does what `migrate` does, from the same T-SQL; the
//! PostgreSQL-side script makes the fence procedures SECURITY DEFINER on
//! Babelfish; the uninstall script removes what a deploy created.

mod babelfish_postgres;
mod guard;
mod sqlcmd;
mod uninstall;

pub use babelfish_postgres::render as render_babelfish_postgres;
pub use sqlcmd::render;
pub use uninstall::{UNINSTALL_REFUSED_HELD, render as render_uninstall};
