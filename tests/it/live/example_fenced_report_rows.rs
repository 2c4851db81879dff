//! The `fenced_report_rows` example, run against a live engine: the frozen
//! worker's late rows are refused and none of them commit; its successor's
//! rows do.

use crate::support;

#[path = "../../../examples/fenced_report_rows.rs"]
#[allow(dead_code)]
mod example;

use fencepost::{ClientConfig, ConnectionString};
use support::TestDatabase;

#[tokio::test]
async fn the_frozen_workers_late_rows_are_refused_and_its_successors_commit() {
    const TEST: &str = "the_frozen_workers_late_rows_are_refused_and_its_successors_commit";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    db.exec(
        "CREATE TABLE dbo.ReportRow (Id int IDENTITY PRIMARY KEY, Writer nvarchar(20) NOT NULL, \
         Generation bigint NOT NULL, Line nvarchar(100) NOT NULL);",
    )
    .await;
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.allow_privileged_login(true);

    let story = example::run(config, &db.ado()).await.unwrap();

    assert_eq!(story.late_write, "refused (Superseded), nothing committed");
    let writers: Vec<(&str, &str)> = story
        .rows
        .iter()
        .map(|(writer, _, line)| (writer.as_str(), line.as_str()))
        .collect();
    assert_eq!(
        writers,
        [
            ("worker-a", "header"),
            ("worker-b", "totals"),
            ("worker-b", "by region")
        ]
    );
    let a_generation = story.rows[0].1;
    assert!(
        story.rows[1..]
            .iter()
            .all(|(_, generation, _)| *generation > a_generation),
        "{story:?}"
    );
    db.drop().await;
}
