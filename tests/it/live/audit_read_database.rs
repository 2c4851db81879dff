//! The catalog read answers for the checked database, all of it: on
//! Babelfish 4.2 a statement naming `msdb.sys.…` or `master.sys.…` moves
//! the rest of its batch into that database, even from an IF branch that
//! does not run, so every query after the Agent job steps would read msdb's
//! catalog instead of this one's.

use crate::support;

use fencepost::audit::read_catalog_counted;
use support::TestDatabase;

#[tokio::test]
async fn the_queries_after_the_msdb_ones_read_the_checked_database() {
    let test = "the_queries_after_the_msdb_ones_read_the_checked_database";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    // A CHECK constraint here and nowhere else: read after the msdb queries
    // in one batch, it would be looked for in msdb and missed.
    db.exec("CREATE TABLE dbo.fp_probe (n int CONSTRAINT fp_probe_positive CHECK (n > 0));")
        .await;
    let (catalog, round_trips) = read_catalog_counted(&mut db.connect().await)
        .await
        .expect("read the catalog");
    let expressions = catalog.table_expressions.expect("the table expressions are read");
    assert!(
        expressions.iter().any(|e| e.kind == "CHECK"
            && e.name == "fp_probe_positive"
            && e.table.eq_ignore_ascii_case("dbo.fp_probe")),
        "the CHECK constraint of this database was not read: {expressions:?}"
    );
    // Babelfish 4.2 cannot render a CHECK holding an IN list through
    // sys.check_constraints ("unrecognized node type: 27"), and fails the
    // whole batch: the fence's own are read all the same.
    assert!(
        expressions
            .iter()
            .any(|e| e.kind == "CHECK" && e.name.eq_ignore_ascii_case("CK_Tenure_Ending")),
        "the fence's CHECK with an IN list was not read: {expressions:?}"
    );
    assert_eq!(round_trips, 2, "this database's batch, then msdb's and master's");
    db.drop().await;
}
