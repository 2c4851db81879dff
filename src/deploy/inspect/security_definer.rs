//! Whether the fence procedures run as their owner on Babelfish, read over
//! TDS. Babelfish does not chain ownership, so a procedure that is not
//! SECURITY DEFINER fails for a service holding only `fence_service`; a
//! T-SQL `ALTER PROCEDURE` (how `migrate` deploys a change) resets the
//! attribute, so each deploy opens this gap until the PostgreSQL-side script
//! (`fencepost script --target babelfish-postgres`) runs again.

use serde::Serialize;

use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::deploy::run::Session;

/// What the engine says about the fence procedures' SECURITY DEFINER.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SecurityDefiner {
    /// Not Babelfish: ownership chaining carries EXECUTE to the tables.
    NotNeeded,
    /// Babelfish: the fence procedures (`schema.name`, as PostgreSQL spells
    /// them) that are not SECURITY DEFINER; empty when every one is.
    Babelfish {
        /// The procedures a `fence_service`-only login cannot run yet.
        not_security_definer: Vec<String>,
    },
    /// Babelfish, but its PostgreSQL catalog could not be read over TDS.
    CannotVerify {
        /// Why not.
        reason: String,
    },
}

impl SecurityDefiner {
    /// True when no fence procedure needs the PostgreSQL-side script: not
    /// Babelfish, or every one is SECURITY DEFINER. "Cannot verify" needs
    /// attention too: it is never a pass.
    pub fn is_current(&self) -> bool {
        match self {
            Self::Babelfish { not_security_definer } => not_security_definer.is_empty(),
            Self::CannotVerify { .. } => false,
            Self::NotNeeded => true,
        }
    }
}

/// `SERVERPROPERTY('Babelfish')` is NULL on SQL Server.
const IS_BABELFISH: &str = "SELECT CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 0 ELSE 1 END AS int);";

/// Babelfish maps the T-SQL database and schema to a PostgreSQL schema
/// (`<db>_<schema>` in multi-db mode); its PostgreSQL catalog is readable
/// over TDS. Run only on Babelfish: SQL Server has none of these objects.
const NOT_SECURITY_DEFINER: &str =
    "SELECT CAST(e.orig_name AS nvarchar(128)) + N'.' + CAST(p.proname AS nvarchar(128)) AS Name
FROM sys.babelfish_namespace_ext AS e
JOIN sys.babelfish_sysdatabases AS d ON d.dbid = e.dbid
JOIN pg_catalog.pg_namespace AS n ON n.nspname = e.nspname
JOIN pg_catalog.pg_proc AS p ON p.pronamespace = n.oid
WHERE d.name = DB_NAME() AND e.orig_name IN ('fence_api', 'fence_admin') AND CAST(p.prosecdef AS int) = 0
ORDER BY 1;";

/// Reads whether the fence procedures are SECURITY DEFINER (two round
/// trips on Babelfish, one elsewhere).
pub async fn read(conn: &mut Connection) -> Result<SecurityDefiner, DeployError> {
    let babelfish = Session::new(conn)
        .first_result(IS_BABELFISH, "asking whether the engine is Babelfish")
        .await?
        .first()
        .and_then(|row| row.get::<i32, _>(0))
        == Some(1);
    if !babelfish {
        return Ok(SecurityDefiner::NotNeeded);
    }
    let rows = match conn.simple_query(NOT_SECURITY_DEFINER).await {
        Ok(stream) => stream.into_first_result().await,
        Err(e) => Err(e),
    };
    Ok(match rows {
        Ok(rows) => SecurityDefiner::Babelfish {
            not_security_definer: rows
                .iter()
                .filter_map(|row| row.get::<&str, _>(0).map(str::to_owned))
                .collect(),
        },
        Err(e) => SecurityDefiner::CannotVerify {
            reason: format!("Babelfish's PostgreSQL catalog is not readable over TDS: {e}"),
        },
    })
}
