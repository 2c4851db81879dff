//! Live tests of the session a deploy runs in: a migration's SET outlives
//! its batch, so the runner sets its options again before each migration and
//! procedure. Each makes its own database on the engine named by
//! FENCEPOST_TEST_MSSQL.

use crate::support;

use fencepost::deploy::Sources;
use support::TestDatabase;
use support::deploy::shipped;

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

/// What a procedure reads when a session with QUOTED_IDENTIFIER OFF creates
/// it as the runner does (a stub through EXEC, then ALTER PROCEDURE) and
/// runs it: "Generation" where the engine takes the setting from the
/// session, "column" where it does not.
async fn read_under_quoted_identifier_off(db: &TestDatabase) -> String {
    let mut conn = db.connect().await;
    support::exec(&mut conn, "SET QUOTED_IDENTIFIER OFF;").await;
    support::exec(
        &mut conn,
        "IF OBJECT_ID(N'dbo.QuotedProbe', N'P') IS NULL EXEC (N'CREATE PROCEDURE dbo.QuotedProbe AS RETURN 0;');",
    )
    .await;
    support::exec(
        &mut conn,
        &format!("ALTER PROCEDURE dbo.QuotedProbe AS {READS_GENERATION};"),
    )
    .await;
    let row = conn
        .simple_query("EXEC dbo.QuotedProbe;")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .expect("the probe returns a row");
    let read = row.get::<&str, usize>(0).unwrap().to_owned();
    drop(conn);
    db.exec("DROP PROCEDURE dbo.QuotedProbe;").await;
    read
}

#[tokio::test]
async fn a_migration_that_turns_quoted_identifier_off_does_not_change_how_procedures_are_deployed() {
    let test = "a_migration_that_turns_quoted_identifier_off_does_not_change_how_procedures_are_deployed";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    // Before deploying: whether this engine lets a session's
    // QUOTED_IDENTIFIER change a procedure at all. Where it does not, no
    // runner could get this wrong, and the test cannot tell one that does.
    let probe = read_under_quoted_identifier_off(&db).await;
    match probe.as_str() {
        "Generation" => {}
        "column" => {
            support::skip(
                test,
                "a procedure created and altered in a session with QUOTED_IDENTIFIER OFF read \"Generation\" \
                 as the column (\"column\"), not as text: the engine does not take QUOTED_IDENTIFIER from the \
                 session that creates a procedure",
            );
            db.drop().await;
            return;
        }
        other => panic!("the probe read {other:?}"),
    }
    db.migrate(&shipped()).await.expect("first deploy");
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
