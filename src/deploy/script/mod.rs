//! `fencepost script`: the deployment rendered as text, without a server. The
//! sqlcmd script does what `migrate` does, from the same T-SQL; the
//! PostgreSQL-side script makes the fence procedures SECURITY DEFINER on
//! Babelfish.

mod babelfish_postgres;
mod guard;
mod sqlcmd;

pub use babelfish_postgres::render as render_babelfish_postgres;
pub use sqlcmd::render;
