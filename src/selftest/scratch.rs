//! The scratch database a run makes for the checks that act on every key of
//! a database (Recover, PruneTenure), which never run on the user's: created
//! under a reserved name with the run's id, given the user's database's
//! settings where the engine lets it, deployed by the runner `migrate` uses,
//! and dropped at the end, within a bound, whatever happened in between.

use std::time::Duration;

use serde::Serialize;

use super::engine::{self, EngineFacts};
use crate::deploy::{MigrateOptions, Sources};
use crate::{Connection, ConnectionString};

/// The start of every scratch database's name; the run id follows it.
pub const SCRATCH_PREFIX: &str = "fencepost_selftest_";

/// The longest creating the database and deploying the fence may take (on
/// Azure SQL Database a new database can take minutes to come online).
const CREATE_BOUND: Duration = Duration::from_secs(300);

/// The longest the drop may take: sessions of the run's own that are still
/// closing are waited for, in steps, and then the drop is given up.
pub(crate) const DROP_BOUND: Duration = Duration::from_secs(30);

/// The longest the drop may take once the run was stopped: a cancelled CI
/// job sends SIGKILL 7.5 s (at the least) after SIGTERM, and the run still
/// has its rows to delete after the drop.
pub(crate) const STOPPED_DROP_BOUND: Duration = Duration::from_secs(4);

/// The scratch database of a run, as the report shows it.
#[derive(Clone, Debug, Serialize)]
pub struct ScratchDatabase {
    /// Its name: [`SCRATCH_PREFIX`] and the run id.
    pub name: String,
    /// Its settings, as the checks ran under them.
    pub engine: EngineFacts,
    /// Where its settings differ from the database under test, and why
    /// they could not be made the same; empty when they agree.
    pub differs: Vec<String>,
    /// Whether it is gone at the end of the run.
    pub dropped: bool,
    /// "dropped at the end of the run", or why not and how to drop it.
    pub outcome: String,
}

/// A scratch database that exists: its connection string and its facts.
pub(crate) struct Scratch {
    pub(crate) target: ConnectionString,
    pub(crate) report: ScratchDatabase,
    /// Where CREATE and DROP DATABASE are run.
    server: ConnectionString,
}

/// Why the scratch database is not there: said by each check that needed it.
pub(crate) struct NotMade(pub(crate) String);

/// How creating the scratch database ended.
pub(crate) enum Created {
    /// It is there, the fence deployed in it.
    Made(Box<Scratch>),
    /// It could not be made (and whatever was made was dropped, or the
    /// reason names it).
    NotMade(NotMade),
    /// The run was stopped while it was made: the making was abandoned (its
    /// session closed, which ends a CREATE or a deploy under way) and the
    /// database dropped, within [`STOPPED_DROP_BOUND`].
    Stopped(ScratchDatabase),
}

/// [`create`], abandoned when `interrupt` is cancelled: the database, if
/// the engine made it before the session closed, is dropped again.
pub(crate) async fn create_unless_stopped(
    target: &ConnectionString,
    facts: &EngineFacts,
    name: &str,
    sources: &Sources,
    interrupt: &tokio_util::sync::CancellationToken,
) -> Created {
    tokio::select! {
        biased;
        () = interrupt.cancelled() => {}
        made = create(target, facts, name, sources) => return match made {
            Ok(made) => Created::Made(Box::new(made)),
            Err(not_made) => Created::NotMade(not_made),
        },
    }
    let server = server_of(target, facts);
    let (dropped, outcome) = drop_database(&server, name, facts, STOPPED_DROP_BOUND).await;
    Created::Stopped(ScratchDatabase {
        name: name.to_string(),
        engine: facts.clone(),
        differs: Vec::new(),
        dropped,
        outcome: if dropped {
            "stopped while it was made; dropped".to_string()
        } else {
            format!("stopped while it was made; {outcome}")
        },
    })
}

/// Where CREATE and DROP DATABASE run: Azure SQL Database creates and
/// drops databases only from master.
fn server_of(target: &ConnectionString, facts: &EngineFacts) -> ConnectionString {
    if facts.engine_edition == Some(5) {
        target.with_database("master")
    } else {
        target.clone()
    }
}

/// The rights a login needs to create a database, as each engine names them.
fn rights(facts: &EngineFacts) -> &'static str {
    if facts.engine_edition == Some(5) {
        "on Azure SQL Database a login in master that is the server's admin, a member of dbmanager or of \
         ##MS_DatabaseManager##"
    } else {
        "CREATE DATABASE (or CREATE ANY DATABASE, or membership of dbcreator)"
    }
}

/// The scratch database's name for run `run`.
pub(crate) fn name(run: &str) -> String {
    format!("{SCRATCH_PREFIX}{run}")
}

/// Creates the scratch database `name` beside `target`'s, gives it
/// `facts`' settings where it can, and deploys `sources` to it. A database
/// created but not made ready is dropped again; one that cannot be dropped
/// is named in the reason.
pub(crate) async fn create(
    target: &ConnectionString,
    facts: &EngineFacts,
    name: &str,
    sources: &Sources,
) -> Result<Scratch, NotMade> {
    let name = name.to_string();
    let server = server_of(target, facts);
    let scratch_target = target.with_database(&name);
    let made = tokio::time::timeout(CREATE_BOUND, async {
        let mut conn = server.connect().await.map_err(|e| {
            NotMade(format!(
                "connecting to create the scratch database: {e} (creating one needs {})",
                rights(facts)
            ))
        })?;
        let create = create_statement(&name, facts);
        match catalog_change(&mut conn, &create).await {
            Ok(()) => Ok(()),
            Err(e) if lacks_the_right(&e) => Err(NotMade(format!(
                "this login may not create the scratch database {name}: {e} (creating one needs {})",
                rights(facts)
            ))),
            Err(e) => Err(NotMade(format!(
                "the scratch database {name} could not be created: {e} (creating one needs {})",
                rights(facts)
            ))),
        }
    })
    .await;
    match made {
        Ok(Ok(())) => {}
        Ok(Err(not_made)) => return Err(not_made),
        Err(_) => {
            let dropped = drop_database(&server, &name, facts, DROP_BOUND).await;
            return Err(NotMade(format!(
                "creating the scratch database {name} did not finish within {} s; {}",
                CREATE_BOUND.as_secs(),
                dropped.1
            )));
        }
    }
    let ready = tokio::time::timeout(CREATE_BOUND, prepare(&scratch_target, facts, sources)).await;
    let failure = match ready {
        Ok(Ok((engine, differs))) => {
            return Ok(Scratch {
                target: scratch_target,
                report: ScratchDatabase {
                    name,
                    engine,
                    differs,
                    dropped: false,
                    outcome: "not dropped yet".to_string(),
                },
                server,
            });
        }
        Ok(Err(why)) => why,
        Err(_) => format!("did not finish within {} s", CREATE_BOUND.as_secs()),
    };
    let (_, dropped) = drop_database(&server, &name, facts, DROP_BOUND).await;
    Err(NotMade(format!(
        "the fence could not be deployed to the scratch database {name}: {failure}; {dropped}"
    )))
}

impl Scratch {
    /// Drops the database, within `bound`; the report says whether it is
    /// gone, and if not, its name and how to drop it.
    pub(crate) async fn remove(mut self, facts: &EngineFacts, bound: Duration) -> ScratchDatabase {
        let (dropped, outcome) = drop_database(&self.server, &self.report.name, facts, bound).await;
        self.report.dropped = dropped;
        self.report.outcome = outcome;
        self.report
    }
}

/// `CREATE DATABASE`, with the collation of the database under test where
/// the engine takes one (Babelfish keeps its server's).
fn create_statement(name: &str, facts: &EngineFacts) -> String {
    match facts.collation.as_deref() {
        Some(collation) if !facts.babelfish && is_identifier(collation) => {
            format!("CREATE DATABASE [{name}] COLLATE {collation};")
        }
        _ => format!("CREATE DATABASE [{name}];"),
    }
}

/// A collation name is letters, digits and underscores; anything else is
/// not put into a statement.
fn is_identifier(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Gives the new database the settings of the database under test that
/// change the checks' answers, deploys the fence, and reads its facts.
async fn prepare(
    target: &ConnectionString,
    facts: &EngineFacts,
    sources: &Sources,
) -> Result<(EngineFacts, Vec<String>), String> {
    let mut conn = target.connect().await.map_err(|e| format!("connecting to it: {e}"))?;
    if !facts.babelfish {
        match_settings(&mut conn, facts).await;
    }
    crate::deploy::migrate(&mut conn, sources, &MigrateOptions::default(), &mut |_| {})
        .await
        .map_err(|e| format!("{e}"))?;
    let scratch = engine::read(&mut conn)
        .await
        .map_err(|e| format!("reading its settings: {e}"))?;
    Ok((scratch.clone(), differences(facts, &scratch)))
}

/// ALTER DATABASE for each setting that differs: an ALTER that fails is
/// left, and the difference is reported.
async fn match_settings(conn: &mut Connection, facts: &EngineFacts) {
    let Ok(new) = engine::read(conn).await else {
        return;
    };
    let on = |v: bool| if v { "ON" } else { "OFF" };
    let mut alters = Vec::new();
    if let Some(rcsi) = facts
        .read_committed_snapshot
        .filter(|v| Some(*v) != new.read_committed_snapshot)
    {
        alters.push(format!(
            "ALTER DATABASE CURRENT SET READ_COMMITTED_SNAPSHOT {};",
            on(rcsi)
        ));
    }
    if let Some(si) = facts
        .allow_snapshot_isolation
        .filter(|v| Some(*v) != new.allow_snapshot_isolation)
    {
        alters.push(format!(
            "ALTER DATABASE CURRENT SET ALLOW_SNAPSHOT_ISOLATION {};",
            on(si)
        ));
    }
    if let Some(level) = facts
        .compatibility_level
        .filter(|v| Some(*v) != new.compatibility_level)
    {
        alters.push(format!("ALTER DATABASE CURRENT SET COMPATIBILITY_LEVEL = {level};"));
    }
    for alter in alters {
        // A refusal is shown by the comparison that follows.
        let _ = run(conn, &alter).await;
    }
}

/// The settings of the scratch database that differ from the database under test.
fn differences(facts: &EngineFacts, scratch: &EngineFacts) -> Vec<String> {
    let on_off = |v: Option<bool>| match v {
        Some(true) => "ON".to_string(),
        Some(false) => "OFF".to_string(),
        None => "not shown".to_string(),
    };
    let text = |v: Option<String>| v.unwrap_or_else(|| "not shown".to_string());
    let pairs = [
        (
            "READ_COMMITTED_SNAPSHOT",
            on_off(facts.read_committed_snapshot),
            on_off(scratch.read_committed_snapshot),
        ),
        (
            "ALLOW_SNAPSHOT_ISOLATION",
            on_off(facts.allow_snapshot_isolation),
            on_off(scratch.allow_snapshot_isolation),
        ),
        (
            "optimized locking",
            on_off(facts.optimized_locking),
            on_off(scratch.optimized_locking),
        ),
        (
            "compatibility level",
            text(facts.compatibility_level.map(|l| l.to_string())),
            text(scratch.compatibility_level.map(|l| l.to_string())),
        ),
        (
            "collation",
            text(facts.collation.clone()),
            text(scratch.collation.clone()),
        ),
    ];
    pairs
        .into_iter()
        .filter(|(_, yours, its)| yours != its)
        .map(|(what, yours, its)| format!("{what}: yours {yours}, the scratch database's {its}"))
        .collect()
}

/// Drops database `name` on `server`: whether it is gone, and what to tell
/// the user. Sessions of the run that are still closing keep it in use for
/// a moment, so an "in use" refusal is tried again until the bound.
async fn drop_database(server: &ConnectionString, name: &str, facts: &EngineFacts, bound: Duration) -> (bool, String) {
    let by_hand = format!("drop it yourself: DROP DATABASE [{name}];");
    let outcome = tokio::time::timeout(bound, async {
        let mut conn = server.connect().await.map_err(|e| format!("connecting: {e}"))?;
        // SQL Server ends the run's own sessions still in it; neither
        // Azure SQL Database nor Babelfish has SINGLE_USER, and there the
        // drop waits for them to close.
        if !facts.babelfish && facts.engine_edition != Some(5) {
            let _ = run(
                &mut conn,
                &format!(
                    "IF DB_ID(N'{name}') IS NOT NULL ALTER DATABASE [{name}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE;"
                ),
            )
            .await;
        }
        catalog_change(&mut conn, &format!("DROP DATABASE IF EXISTS [{name}];"))
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    match outcome {
        Ok(Ok(())) => (true, "dropped at the end of the run".to_string()),
        Ok(Err(e)) => (false, format!("LEFT BEHIND: the drop failed: {e}; {by_hand}")),
        Err(_) => (
            false,
            format!(
                "LEFT BEHIND: the drop did not finish within {} s; {by_hand}",
                bound.as_secs()
            ),
        ),
    }
}

/// Runs a batch to its end.
async fn run(conn: &mut Connection, sql: &str) -> Result<(), tiberius::error::Error> {
    conn.simple_query(sql).await?.into_results().await.map(drop)
}

/// Runs a CREATE or DROP DATABASE, again while the engine refuses it only
/// because another session is in the way for a moment: the database is
/// still in use by a session of the run that is closing (SQL Server 3702;
/// Babelfish's "currently in use"), or, on Babelfish, another session
/// changes the catalog at the same time ("tuple concurrently updated", and
/// a role of a login being dropped that a new database touches). The
/// caller bounds it.
async fn catalog_change(conn: &mut Connection, sql: &str) -> Result<(), tiberius::error::Error> {
    let mut attempt = 0u64;
    loop {
        attempt += 1;
        match run(conn, sql).await {
            Err(tiberius::error::Error::Server(token)) if is_transient(token.code(), token.message()) => {
                tokio::time::sleep(Duration::from_millis(100 * attempt.min(10))).await;
            }
            other => return other,
        }
    }
}

/// SQL Server's "CREATE DATABASE permission denied in database 'master'."
const CREATE_DATABASE_DENIED: u32 = 262;

/// A refusal for want of the right to create a database: 262 on SQL Server
/// and Azure SQL; Babelfish passes PostgreSQL's "permission denied" through.
fn lacks_the_right(error: &tiberius::error::Error) -> bool {
    match error {
        tiberius::error::Error::Server(token) => {
            token.code() == CREATE_DATABASE_DENIED || token.message().to_lowercase().contains("permission denied")
        }
        _ => false,
    }
}

/// SQL Server's "Cannot drop database ... because it is currently in use."
const DATABASE_IN_USE: u32 = 3702;
/// The one number Babelfish gives every PostgreSQL error; its message tells them apart.
const BABELFISH: u32 = 33557097;

fn is_transient(code: u32, message: &str) -> bool {
    code == DATABASE_IN_USE
        || (code == BABELFISH
            && (message == "tuple concurrently updated"
                || message == "tuple concurrently deleted"
                || message.contains("because it is currently in use in another session")
                || (message.starts_with("role \"") && message.ends_with("\" does not exist"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collation_is_given_only_where_the_engine_takes_it_and_only_as_an_identifier() {
        let mut facts = EngineFacts {
            collation: Some("Latin1_General_100_CI_AS_SC_UTF8".to_string()),
            ..EngineFacts::default()
        };
        assert_eq!(
            create_statement("fencepost_selftest_ab12", &facts),
            "CREATE DATABASE [fencepost_selftest_ab12] COLLATE Latin1_General_100_CI_AS_SC_UTF8;"
        );
        facts.collation = Some("x; DROP TABLE t".to_string());
        assert_eq!(
            create_statement("fencepost_selftest_ab12", &facts),
            "CREATE DATABASE [fencepost_selftest_ab12];"
        );
        facts.collation = Some("Latin1_General_CI_AS".to_string());
        facts.babelfish = true;
        assert_eq!(
            create_statement("fencepost_selftest_ab12", &facts),
            "CREATE DATABASE [fencepost_selftest_ab12];"
        );
    }

    #[test]
    fn only_a_refusal_that_passes_is_tried_again() {
        assert!(is_transient(
            3702,
            "Cannot drop database \"x\" because it is currently in use."
        ));
        assert!(is_transient(BABELFISH, "tuple concurrently updated"));
        assert!(is_transient(BABELFISH, "role \"app_login\" does not exist"));
        assert!(!is_transient(
            262,
            "CREATE DATABASE permission denied in database 'master'."
        ));
        assert!(!is_transient(BABELFISH, "permission denied to create database"));
        assert!(!is_transient(1801, "Database 'x' already exists."));
    }

    #[test]
    fn a_setting_that_differs_is_named_with_both_values() {
        let yours = EngineFacts {
            read_committed_snapshot: Some(true),
            compatibility_level: Some(150),
            ..EngineFacts::default()
        };
        let its = EngineFacts {
            read_committed_snapshot: Some(false),
            compatibility_level: Some(150),
            ..EngineFacts::default()
        };
        assert_eq!(
            differences(&yours, &its),
            ["READ_COMMITTED_SNAPSHOT: yours ON, the scratch database's OFF"]
        );
        assert!(differences(&yours, &yours).is_empty());
    }
}
