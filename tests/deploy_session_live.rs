//! Live tests of the session a deploy runs in: a migration's SET outlives
//! its batch, so the runner sets its options again before each migration and
//! procedure. Each makes its own database on the engine named by
//! FENCEPOST_TEST_MSSQL.

mod deploy_support;
mod support;

use std::io::Write;

use deploy_support::shipped;
use fencepost::deploy::Sources;
use support::TestDatabase;

/// Sources whose V2 turns QUOTED_IDENTIFIER off at batch level, which
/// outlives the batch in the deploy's session.
fn quoted_identifier_off() -> Sources {
    shipped()
        .with_migration("V102__quoted_off.sql", "SET QUOTED_IDENTIFIER OFF;\n")
        .unwrap()
}

// Under QUOTED_IDENTIFIER ON "Generation" below is the column; under OFF it
// is the text 'Generation'.
const READS_GENERATION: &str = "SELECT \"Generation\" AS V FROM (SELECT N'column' AS Generation) AS t";

#[tokio::test]
async fn a_migration_that_turns_quoted_identifier_off_does_not_change_how_the_next_migration_runs() {
    let test = "a_migration_that_turns_quoted_identifier_off_does_not_change_how_the_next_migration_runs";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let sources = quoted_identifier_off()
        .with_migration(
            "V103__reads.sql",
            &format!("CREATE TABLE fence.Quoted (V nvarchar(20) NOT NULL);\nINSERT INTO fence.Quoted (V) {READS_GENERATION};\n"),
        )
        .unwrap();
    db.migrate(&sources).await.expect("deploy");
    let rows = db.query("SELECT V FROM fence.Quoted;").await;
    assert_eq!(
        rows[0].get::<&str, usize>(0),
        Some("column"),
        "V3 ran under V2's QUOTED_IDENTIFIER OFF"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_migration_that_turns_quoted_identifier_off_does_not_change_how_procedures_are_deployed() {
    let test = "a_migration_that_turns_quoted_identifier_off_does_not_change_how_procedures_are_deployed";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    if db.is_babelfish().await {
        let _ = writeln!(
            std::io::stderr(),
            "{test}: skipped: Babelfish keeps the QUOTED_IDENTIFIER a procedure was created with and ignores \
             the session's at ALTER PROCEDURE, so the session the runner deploys in cannot show"
        );
        db.drop().await;
        return;
    }
    let sources = quoted_identifier_off()
        .with_procedure(
            "fence_api.Probe.sql",
            &format!("CREATE PROCEDURE fence_api.Probe AS {READS_GENERATION};"),
        )
        .unwrap();
    db.migrate(&sources).await.expect("deploy");
    let rows = db.query("EXEC fence_api.Probe;").await;
    assert_eq!(
        rows[0].get::<&str, usize>(0),
        Some("column"),
        "the procedure was altered under the migration's QUOTED_IDENTIFIER OFF"
    );
    db.drop().await;
}
