//! `fencepost script`: the whole deployment as one sqlcmd script, for
//! reviewers and for pipelines that cannot connect. It is idempotent: each
//! migration is guarded by its history row, each procedure is created when
//! missing and then altered, and the permission scripts are idempotent.

use std::fmt::Write;

use super::sources::{MigrationSource, Sources};
use super::state::HISTORY_TABLE;
use super::statements::{begin_procedure_deploy, bootstrap, literal, record_migration, record_procedure};

/// A fixed timestamp for history rows written by scripts is wrong; the server
/// stamps them instead, in refinery's RFC 3339 format.
const SERVER_NOW_RFC3339: &str = "CONVERT(nvarchar(33), SYSUTCDATETIME(), 127) + N'Z'";

/// Renders the deployment script. Its first batch sets QUOTED_IDENTIFIER and
/// ANSI_NULLS ON as the runner's connection has them: a procedure keeps the
/// settings of the session that created or altered it, and sqlcmd starts with
/// QUOTED_IDENTIFIER OFF.
pub fn render(sources: &Sources) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- fencepost {} deployment script: {} migrations, {} procedures, {} permission scripts.
-- Idempotent: safe to run on a new database or on one already deployed.
-- Run with sqlcmd (e.g. sqlcmd -S server -d database -i this-file), or in SSMS with SQLCMD mode on.
:on error exit
SET NOCOUNT ON;
SET XACT_ABORT ON;
SET QUOTED_IDENTIFIER ON;
SET ANSI_NULLS ON;
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
    for migration in sources.migrations() {
        render_migration(&mut out, migration);
    }
    for procedure in sources.procedures() {
        let _ = writeln!(
            out,
            "-- procedures/{file}\n{begin}\nGO\n{alter}\nGO\n{record}\nCOMMIT TRANSACTION;\nGO\n",
            file = procedure.file(),
            begin = begin_procedure_deploy(procedure),
            alter = procedure.alter_text().trim_end(),
            record = record_procedure(procedure),
        );
    }
    for script in sources.permissions() {
        let _ = writeln!(
            out,
            "-- permissions/{}\n{}\nGO\n",
            script.file(),
            script.text().trim_end()
        );
    }
    out
}

/// A migration whose batches each run only while its history row is absent;
/// the row is written in the same transaction as the batches.
fn render_migration(out: &mut String, migration: &MigrationSource) {
    let guard = format!(
        "IF NOT EXISTS (SELECT 1 FROM {HISTORY_TABLE} WHERE version = {})",
        migration.version()
    );
    let _ = writeln!(
        out,
        "-- migrations/{}\nSET XACT_ABORT ON;\nBEGIN TRANSACTION;\nGO",
        migration.file()
    );
    for batch in migration.batches() {
        for _ in 0..batch.repeat {
            // EXEC gives each batch a batch of its own, as CREATE SCHEMA and
            // CREATE PROCEDURE require, while the guard stays outside it.
            let _ = writeln!(out, "{guard}\n    EXEC ({});\nGO", literal(batch.text.trim()));
        }
    }
    let m = migration.migration();
    let record = record_migration(m.version(), m.name(), SERVER_NOW_RFC3339, m.checksum());
    let _ = writeln!(out, "{guard}\n    {record}\nCOMMIT TRANSACTION;\nGO\n");
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
        let mut batches = sqlcmd_batches(&render(&Sources::embedded().unwrap()));
        let after_last_go = batches.pop().unwrap();
        assert!(
            after_last_go.trim().is_empty(),
            "text after the last GO: {after_last_go}"
        );
        assert!(batches.len() > 20, "{} batches", batches.len());
        for (i, batch) in batches.iter().enumerate() {
            assert!(holds_code(batch), "batch {} holds no code:\n{batch}", i + 1);
        }
    }

    #[test]
    fn the_first_batch_sets_quoted_identifier_and_ansi_nulls_before_any_procedure_exists() {
        let script = render(&Sources::embedded().unwrap());
        let first = &sqlcmd_batches(&script)[0];
        for setting in ["SET QUOTED_IDENTIFIER ON;", "SET ANSI_NULLS ON;"] {
            assert!(
                first.lines().any(|l| l == setting),
                "{setting} is not in the first batch:\n{first}"
            );
        }
        assert!(!first.contains("PROCEDURE"), "{first}");
    }

    #[test]
    fn every_procedure_is_altered_in_the_script() {
        let sources = Sources::embedded().unwrap();
        let script = render(&sources);
        for p in sources.procedures() {
            assert!(script.contains(&p.alter_text()), "{} is missing", p.qualified_name());
        }
    }

    #[test]
    fn migrations_are_guarded_by_their_history_row() {
        let script = render(&Sources::embedded().unwrap());
        assert!(script.contains("IF NOT EXISTS (SELECT 1 FROM fence.SchemaHistory WHERE version = 1)"));
    }
}
