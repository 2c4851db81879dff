//! `fencepost script`: the whole deployment as one sqlcmd script, for
//! reviewers and for pipelines that cannot connect. It is idempotent: each
//! migration is guarded by its history row, each procedure is created when
//! missing and then altered, and the permission scripts are idempotent. It
//! refuses what `migrate` refuses, and each migration and procedure is one
//! batch that commits all of itself or nothing.

use std::fmt::Write;

use super::guard;
use crate::deploy::run::{DEFAULT_MIGRATION_LOCK_TIMEOUT, Grant};
use crate::deploy::sql::{
    SESSION_OPTIONS, begin_migration, bootstrap, commit_migration, commit_migration_alone, commit_procedure,
    in_migration_transaction, outside_any_transaction, record_deployment,
};
use crate::deploy::upgrade;
use crate::schema::HISTORY_TABLE;
use crate::source::{MigrationSource, ProcedureSource, ScriptSource, Sources};
use crate::tsql::{Batch, literal};

/// A fixed timestamp for history rows written by scripts is wrong; the server
/// stamps them instead, in refinery's RFC 3339 format.
const SERVER_NOW_RFC3339: &str = "CONVERT(nvarchar(33), SYSUTCDATETIME(), 127) + N'Z'";

/// Renders the deployment script. Its first batch sets the session options
/// the runner sets: a procedure keeps the settings of the session that
/// created or altered it, and sqlcmd starts with QUOTED_IDENTIFIER OFF.
pub fn render(sources: &Sources) -> String {
    render_with_grants(sources, &[])
}

/// [`render`], ending with a section that adds each member of `grants` to
/// its fence role, as `migrate --grant` does: for a DBA who deploys offline.
pub fn render_with_grants(sources: &Sources, grants: &[Grant]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- fencepost {} deployment script: {} migrations, {} procedures, {} permission scripts.
-- Idempotent: safe to run on a new database or on one already deployed. It refuses a database
-- whose migration history this version does not ship (a newer fencepost, or a changed file).
-- Each migration and each procedure is one batch that commits all of itself or nothing, and
-- every section first checks that the sections before it completed, so a failure is never
-- followed by a commit, even in a client that carries on after errors.
-- Unlike `fencepost migrate`, each batch of a migration runs inside EXEC here: a temporary
-- table or a SET option does not outlive the batch that made it.
-- Run with sqlcmd (e.g. sqlcmd -S server -d database -i this-file), or in SSMS with SQLCMD mode on.
:on error exit
SET NOCOUNT ON;
{SESSION_OPTIONS}
GO
",
        env!("CARGO_PKG_VERSION"),
        sources.migrations().len(),
        sources.procedures().len(),
        sources.permissions().len(),
    );
    let _ = writeln!(
        out,
        "-- fencepost's schema and migration history\n{}\nGO\n",
        bootstrap()
    );
    let _ = writeln!(
        out,
        "-- the database's migration history must be one this script ships\n{}GO\n",
        guard::history_agrees(sources)
    );
    let _ = writeln!(
        out,
        "-- what this run finds, so that the record of its deployment counts the migrations it applied\n{}GO\n",
        count_history_before()
    );
    let versions: Vec<i32> = sources.migrations().iter().map(MigrationSource::version).collect();
    for (index, migration) in sources.migrations().iter().enumerate() {
        render_migration(&mut out, sources, migration, &versions[..index]);
    }
    for procedure in sources.procedures() {
        render_procedure(&mut out, sources, procedure, &versions);
    }
    for script in sources.permissions() {
        render_permissions(&mut out, sources, script, &versions);
    }
    render_record(&mut out, sources, &versions);
    out += &super::grants::render(sources, &versions, grants);
    out
}

/// The session's temporary table that holds how many migrations the history
/// held when the script started: batches share no variables, and a
/// temporary table lasts as long as the session.
const HISTORY_BEFORE: &str = "#FencepostHistoryBefore";

/// Notes how many migrations the history holds before any is applied.
fn count_history_before() -> String {
    format!(
        "IF OBJECT_ID(N'tempdb..{HISTORY_BEFORE}') IS NULL
    CREATE TABLE {HISTORY_BEFORE} (Migrations int NOT NULL);
DELETE FROM {HISTORY_BEFORE};
INSERT INTO {HISTORY_BEFORE} (Migrations) SELECT COUNT(*) FROM {HISTORY_TABLE};
"
    )
}

/// The record of the deployment, as `migrate` writes it, after every
/// section succeeded. The script alters every procedure, so it counts them
/// all as applied.
fn render_record(out: &mut String, sources: &Sources, versions: &[i32]) {
    let migrations = format!("(SELECT COUNT(*) FROM {HISTORY_TABLE}) - (SELECT Migrations FROM {HISTORY_BEFORE})");
    let record = record_deployment(&migrations, &sources.procedures().len().to_string());
    let _ = writeln!(
        out,
        "-- the record of this deployment in fence.Deployment (and of the database identity, when none is recorded)\n{}{}GO\n",
        guard::section(sources, versions),
        stop_at_first_error(&record)
    );
}

/// `body` in one transaction that commits at its end (the body's own
/// COMMIT) or rolls back and rethrows on any error, a compile error of
/// dynamic SQL included. The body is not indented: its string literals hold
/// procedure and migration text, which must reach the server as shipped.
fn all_or_nothing(body: &str) -> String {
    stop_at_first_error(&format!("    BEGIN TRANSACTION;\n{body}"))
}

/// `body`, stopping at its first error (a compile error of dynamic SQL
/// would otherwise let the batch go on) after rolling back any transaction.
fn stop_at_first_error(body: &str) -> String {
    format!(
        "BEGIN TRY
{body}END TRY
BEGIN CATCH
    SET IMPLICIT_TRANSACTIONS OFF;
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
    THROW;
END CATCH;
"
    )
}

/// Each batch as an `EXEC` of its own, as often as its `GO n` says, with
/// `between` after each but the last. EXEC gives each batch a batch of its
/// own, as CREATE SCHEMA and CREATE PROCEDURE require, inside the section's
/// one batch.
fn execs(batches: &[Batch], between: &str) -> String {
    let runs: Vec<String> = batches
        .iter()
        .flat_map(|b| std::iter::repeat_n(format!("EXEC ({});\n", literal(b.text.trim())), b.repeat as usize))
        .collect();
    runs.join(between)
}

/// A migration as one batch that runs only while its history row is absent,
/// checks after each of its batches that the transaction is intact, and
/// writes the row in the same transaction. One marked
/// `-- fencepost: no-transaction` runs its batches in autocommit, each
/// checked for a transaction left open, and is recorded in a transaction of
/// its own after the last.
fn render_migration(out: &mut String, sources: &Sources, migration: &MigrationSource, earlier: &[i32]) {
    let m = migration.migration();
    let what = format!("migration {}", migration.name());
    let lock_timeout_ms = DEFAULT_MIGRATION_LOCK_TIMEOUT.as_millis();
    let (note, body) = if migration.is_transactional() {
        // As under `migrate`: two levels deep and IMPLICIT_TRANSACTIONS on,
        // so that a COMMIT or ROLLBACK in a batch commits nothing. The
        // commit's own check follows the last batch.
        let commit = commit_migration(m.version(), m.name(), SERVER_NOW_RFC3339, m.checksum(), "");
        let check = in_migration_transaction(&what);
        let before = upgrade::before(migration).map_or(String::new(), |step| {
            format!(
                "-- before the migration: see src/deploy/upgrade.rs\nEXEC ({});\n{check}",
                literal(step)
            )
        });
        let body = format!(
            "{}\n{before}{}{commit}\n",
            begin_migration(i64::try_from(lock_timeout_ms).unwrap_or(i64::MAX)),
            execs(&upgrade::batches_as_run(migration), &check)
        );
        ("", stop_at_first_error(&body))
    } else {
        let check = outside_any_transaction(&what);
        let commit = commit_migration_alone(m.version(), m.name(), SERVER_NOW_RFC3339, m.checksum());
        let body = format!(
            "SET LOCK_TIMEOUT {lock_timeout_ms};\n{}{check}{commit}\nSET LOCK_TIMEOUT -1;\n",
            execs(&upgrade::batches_as_run(migration), &check)
        );
        (" (runs without a transaction)", stop_at_first_error(&body))
    };
    let _ = writeln!(
        out,
        "-- migrations/{file}{note}\n{guard}IF NOT EXISTS (SELECT 1 FROM {HISTORY_TABLE} WHERE version = {version})\nBEGIN\n{body}END;\nGO\n",
        file = migration.file(),
        guard = guard::section(sources, earlier),
        version = m.version(),
    );
}

/// A procedure as one batch: the stub when missing, the ALTER and the
/// journal row commit together or not at all.
fn render_procedure(out: &mut String, sources: &Sources, procedure: &ProcedureSource, versions: &[i32]) {
    let body = format!(
        "IF OBJECT_ID({name}, N'P') IS NULL\n    EXEC ({stub});\nEXEC ({alter});\n{commit}\n",
        name = literal(&procedure.qualified_name()),
        stub = literal(&procedure.stub_text()),
        alter = literal(procedure.alter_text().trim_end()),
        commit = commit_procedure(procedure),
    );
    let _ = writeln!(
        out,
        "-- procedures/{}\n{}{}GO\n",
        procedure.file(),
        guard::section(sources, versions),
        all_or_nothing(&body)
    );
}

/// A permission script as one batch after the checks; like under `migrate`,
/// it is not transactional (it is idempotent, and re-applied on every deploy).
fn render_permissions(out: &mut String, sources: &Sources, script: &ScriptSource, versions: &[i32]) {
    let _ = writeln!(
        out,
        "-- permissions/{}\n{}{}GO\n",
        script.file(),
        guard::section(sources, versions),
        execs(script.batches(), "")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The script cut where sqlcmd cuts it: at each line that is `GO`,
    /// optionally with a repeat count. The text after the last `GO` is the
    /// last element.
    fn sqlcmd_batches(script: &str) -> Vec<String> {
        let mut batches = vec![String::new()];
        for line in script.lines() {
            let mut words = line.split_whitespace();
            let is_go = words.next().is_some_and(|w| w.eq_ignore_ascii_case("GO"))
                && words.next().is_none_or(|count| count.parse::<u32>().is_ok())
                && words.next().is_none();
            if is_go {
                batches.push(String::new());
            } else {
                let last = batches.last_mut().unwrap();
                last.push_str(line);
                last.push('\n');
            }
        }
        batches
    }

    /// Code a server would run: not blank, not a comment, not a sqlcmd directive.
    fn holds_code(batch: &str) -> bool {
        batch
            .lines()
            .map(str::trim)
            .any(|l| !l.is_empty() && !l.starts_with("--") && !l.starts_with(':'))
    }

    #[test]
    fn the_script_splits_into_batches_that_each_hold_code() {
        let sources = Sources::embedded().unwrap();
        let mut batches = sqlcmd_batches(&render(&sources));
        let after_last_go = batches.pop().unwrap();
        assert!(
            after_last_go.trim().is_empty(),
            "text after the last GO: {after_last_go}"
        );
        // Options, bootstrap, history check, the count before, one batch per
        // section, then the record of the deployment.
        let sections = sources.migrations().len() + sources.procedures().len() + sources.permissions().len();
        assert_eq!(batches.len(), 4 + sections + 1);
        for (i, batch) in batches.iter().enumerate() {
            assert!(holds_code(batch), "batch {} holds no code:\n{batch}", i + 1);
        }
    }

    #[test]
    fn the_first_batch_sets_the_session_options_the_runner_sets() {
        let script = render(&Sources::embedded().unwrap());
        let first = &sqlcmd_batches(&script)[0];
        assert!(first.contains(SESSION_OPTIONS), "{first}");
        assert!(!first.contains("PROCEDURE"), "{first}");
        for setting in ["QUOTED_IDENTIFIER ON", "ANSI_NULLS, ", "IMPLICIT_TRANSACTIONS OFF"] {
            assert!(SESSION_OPTIONS.contains(setting), "{setting}");
        }
        let lock = crate::deploy::sql::take_deploy_lock(std::time::Duration::from_secs(1));
        assert!(lock.starts_with(SESSION_OPTIONS), "{lock}");
    }

    /// The one batch of the script that holds `marker`.
    fn section_of(script: &str, marker: &str) -> String {
        let found: Vec<String> = sqlcmd_batches(script)
            .into_iter()
            .filter(|b| b.contains(marker))
            .collect();
        assert_eq!(found.len(), 1, "{marker} is in {} batches", found.len());
        found.into_iter().next().unwrap()
    }

    #[test]
    fn a_procedure_is_one_batch_that_commits_its_stub_alter_and_journal_row_together_or_not_at_all() {
        let sources = Sources::embedded().unwrap();
        let script = render(&sources);
        for p in sources.procedures() {
            let batch = section_of(&script, &format!("-- procedures/{}", p.file()));
            let order = [
                "THROW 50191",
                "BEGIN TRY",
                "BEGIN TRANSACTION;",
                "EXEC (N'CREATE PROCEDURE",
                "EXEC (N'",
                "UPDATE fence.DeployedProcedure",
                "COMMIT TRANSACTION;",
                "BEGIN CATCH",
                "ROLLBACK TRANSACTION;",
                "THROW;",
            ];
            assert_in_order(&batch, &order);
        }
    }

    /// Each of `parts` appears in `batch`, each after the one before it.
    fn assert_in_order(batch: &str, parts: &[&str]) {
        let mut at = 0;
        for part in parts {
            let found = batch[at..]
                .find(part)
                .unwrap_or_else(|| panic!("{part} out of order in:\n{batch}"));
            at += found + part.len();
        }
    }

    #[test]
    fn a_migration_is_one_batch_that_checks_its_transaction_after_each_of_its_batches() {
        let sources = Sources::embedded().unwrap();
        let script = render(&sources);
        for m in sources.migrations() {
            let batch = section_of(&script, &format!("-- migrations/{}", m.file()));
            let checks = batch
                .matches("IF @@TRANCOUNT <> 2 OR XACT_STATE() <> 1 OR (@@OPTIONS & 2) = 0")
                .count();
            let steps = usize::from(upgrade::before(m).is_some());
            let runs: usize = m.batches().iter().map(|b| b.repeat as usize).sum();
            assert_eq!(checks, runs + steps, "{batch}");
            assert!(batch.contains("BEGIN CATCH"), "{batch}");
        }
    }

    #[test]
    fn a_stray_commit_or_rollback_in_a_migration_commits_nothing_of_it_in_the_script() {
        let text = "CREATE TABLE dbo.A (Id int);\nGO\nCOMMIT;\nGO\nROLLBACK;\nCREATE TABLE dbo.B (Id int);\n";
        let sources =
            Sources::from_files(vec![("V1__a.sql".into(), text.as_bytes().to_vec())], vec![], vec![]).unwrap();
        let batch = section_of(&render(&sources), "-- migrations/V1__a.sql");
        // Two levels, then implicit transactions, before the first batch runs:
        // a COMMIT in a batch only lowers the count, and what follows a
        // ROLLBACK opens a transaction of its own instead of autocommitting.
        let order = [
            "BEGIN TRY",
            "BEGIN TRANSACTION;\nBEGIN TRANSACTION;\nSET IMPLICIT_TRANSACTIONS ON;\nSET LOCK_TIMEOUT 5000;",
            "EXEC (N'CREATE TABLE dbo.A",
            "IF @@TRANCOUNT <> 2",
            "EXEC (N'COMMIT;')",
            "IF @@TRANCOUNT <> 2",
            "EXEC (N'ROLLBACK;",
            "IF @@TRANCOUNT <> 2",
            "INSERT INTO fence.SchemaHistory",
            "SET IMPLICIT_TRANSACTIONS OFF;\nCOMMIT TRANSACTION;\nCOMMIT TRANSACTION;",
            "BEGIN CATCH",
            "SET IMPLICIT_TRANSACTIONS OFF;\n    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;\n    THROW;",
        ];
        assert_in_order(&batch, &order);
        assert_eq!(batch.matches("COMMIT TRANSACTION;").count(), 2, "{batch}");
    }

    #[test]
    fn a_migration_without_a_transaction_opens_one_only_to_record_itself() {
        let text = "-- fencepost: no-transaction\nCREATE TABLE fence.A (Id int);\nGO\nCREATE TABLE fence.B (Id int);\n";
        let sources =
            Sources::from_files(vec![("V1__a.sql".into(), text.as_bytes().to_vec())], vec![], vec![]).unwrap();
        let batch = section_of(
            &render(&sources),
            "-- migrations/V1__a.sql (runs without a transaction)",
        );
        assert_eq!(batch.matches("BEGIN TRANSACTION;").count(), 1, "{batch}");
        let begin = batch.find("BEGIN TRANSACTION;").unwrap();
        assert!(batch.rfind("EXEC (N'").unwrap() < begin, "{batch}");
        assert!(
            begin < batch.find("INSERT INTO fence.SchemaHistory").unwrap(),
            "{batch}"
        );
        assert_eq!(
            batch.matches("IF @@TRANCOUNT <> 0 OR (@@OPTIONS & 2) <> 0").count(),
            2,
            "{batch}"
        );
    }

    #[test]
    fn every_section_refuses_a_history_this_script_does_not_ship() {
        let sources = Sources::embedded().unwrap();
        let script = render(&sources);
        let batches = sqlcmd_batches(&script);
        let sections = batches
            .iter()
            .filter(|b| b.contains("-- migrations/") || b.contains("-- procedures/") || b.contains("-- permissions/"));
        for section in sections {
            assert!(section.contains("THROW 50191"), "{section}");
        }
    }

    #[test]
    fn every_procedure_is_altered_in_the_script() {
        let sources = Sources::embedded().unwrap();
        let script = render(&sources);
        for p in sources.procedures() {
            let exec = format!("EXEC ({});", literal(p.alter_text().trim_end()));
            assert!(script.contains(&exec), "{} is missing", p.qualified_name());
        }
    }

    #[test]
    fn the_last_section_records_the_deployment_after_checking_every_migration_and_counts_what_this_run_applied() {
        let sources = Sources::embedded().unwrap();
        let script = render(&sources);
        let batches: Vec<String> = sqlcmd_batches(&script).into_iter().filter(|b| holds_code(b)).collect();
        let last = batches.last().unwrap();
        assert!(last.contains("-- the record of this deployment"), "{last}");
        assert!(last.contains("THROW 50191") && last.contains("THROW 50192"), "{last}");
        assert!(last.contains("INSERT INTO fence.Deployment"), "{last}");
        let counts = format!(
            "DECLARE @MigrationsApplied int = (SELECT COUNT(*) FROM fence.SchemaHistory) - (SELECT Migrations FROM \
             #FencepostHistoryBefore), @ProceduresApplied int = {};",
            sources.procedures().len()
        );
        assert!(last.contains(&counts), "{last}");
        // The count before is taken before the first migration.
        let before = script.find("INSERT INTO #FencepostHistoryBefore");
        assert!(before.is_some() && before < script.find("-- migrations/"), "{script}");
    }

    #[test]
    fn migrations_are_guarded_by_their_history_row() {
        let script = render(&Sources::embedded().unwrap());
        assert!(script.contains("IF NOT EXISTS (SELECT 1 FROM fence.SchemaHistory WHERE version = 1)"));
    }
}
