//! `fencepost script`: the deployment rendered as text, without a server. The
//! sqlcmd script does what `migrate` does, from the same T-SQL; the
//! PostgreSQL-side script makes the fence procedures SECURITY DEFINER on
//! Babelfish; the uninstall script removes what a deploy created. With
//! grants, the sqlcmd script also adds service users to the fence roles.

mod babelfish_postgres;
mod grants;
mod guard;
mod schemas;
mod sqlcmd;
mod uninstall;

pub use babelfish_postgres::render as render_babelfish_postgres;
pub use grants::{GRANT_REFUSED_DEPLOYING_USER, GRANT_REFUSED_NO_USER, refuse_for_sqlcmd};
pub use schemas::render as render_schemas;
pub use sqlcmd::{render, render_with_grants};
pub use uninstall::{UNINSTALL_REFUSED_HELD, render as render_uninstall};
