//! A report table of a test's own in the shared database: the service's own
//! table that fenced writes land in, and who wrote each row.

use uuid::Uuid;

use super::TestDatabase;

/// Creates a table of `(Id, Writer)` rows named for this test alone and
/// returns its name. With `numbered`, the table numbers its rows itself
/// (`Id int IDENTITY`) and [`insert_into`] is the statement that writes one;
/// otherwise each insert names its `Id`.
pub async fn create(db: &TestDatabase, numbered: bool) -> String {
    let report = format!("dbo.Report_{}", Uuid::new_v4().simple());
    let id = if numbered {
        "Id int IDENTITY PRIMARY KEY"
    } else {
        "Id int PRIMARY KEY"
    };
    db.exec(&format!("CREATE TABLE {report} ({id}, Writer nvarchar(20) NOT NULL);"))
        .await;
    report
}

/// The statement that writes one row of a numbered table: `@P1` is its writer.
pub fn insert_into(report: &str) -> String {
    format!("INSERT INTO {report} (Writer) VALUES (@P1)")
}

/// Who wrote each committed row, in row order.
pub async fn writers(db: &TestDatabase, report: &str) -> Vec<String> {
    db.query(&format!("SELECT Writer FROM {report} ORDER BY Id"))
        .await
        .iter()
        .map(|row| row.get::<&str, _>(0).unwrap().to_string())
        .collect()
}
