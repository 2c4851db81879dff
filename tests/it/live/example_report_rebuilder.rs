//! The `report_rebuilder` example, run against a live engine: the stalled
//! worker's late write is refused as superseded, both healthy workers
//! publish, and the report readers see is a healthy worker's, under a later
//! generation than the stalled one held.

use crate::support;

#[path = "../../../examples/report_rebuilder.rs"]
#[allow(dead_code)]
mod example;

use std::sync::{Arc, Mutex};

use fencepost::client::{Publication, Publish, RefusalReason};
use fencepost::{ClientConfig, ConnectionString};
use support::TestDatabase;

#[tokio::test]
async fn the_stalled_workers_late_write_is_refused_and_a_healthy_workers_report_stands() {
    const TEST: &str = "the_stalled_workers_late_write_is_refused_and_a_healthy_workers_report_stands";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.allow_privileged_login(true);
    // A key of this test's own: the database is shared.
    let report = format!("report:daily-revenue:{}", uuid::Uuid::new_v4());
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let said = lines.clone();
    let story = example::run(config, &report, Arc::new(move |line| said.lock().unwrap().push(line)))
        .await
        .unwrap();
    let lines = lines.lock().unwrap().clone();

    assert_eq!(
        story.late_write,
        Publish::Refused(RefusalReason::Superseded),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("worker-a: woke up, late write refused: ")),
        "{lines:#?}"
    );
    for name in ["worker-b", "worker-c"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{name}: published under generation "))),
            "{name} did not publish: {lines:#?}"
        );
    }
    match story.final_report {
        Publication::Found {
            generation, payload, ..
        } => {
            assert!(generation > story.stalled_generation, "{generation}: {lines:#?}");
            assert!(
                payload == "revenue report rebuilt by worker-b" || payload == "revenue report rebuilt by worker-c",
                "{payload:?}"
            );
        }
        other => panic!("no report was published: {other:?}\n{lines:#?}"),
    }
    db.drop().await;
}
