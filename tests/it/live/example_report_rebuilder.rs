//! The `report_rebuilder` example, run against a live engine: the stalled
//! worker's late write is refused as superseded, and the report readers see
//! is one a healthy worker published, under a later generation than the
//! stalled one held.

use crate::support;

#[path = "../../../examples/report_rebuilder.rs"]
#[allow(dead_code)]
mod example;

use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    // Longer than the example's own: on a busy engine a healthy worker's
    // renewal on a new session can take seconds, and a lease lost there
    // publishes nothing (safely, but the story would end without its report).
    let lease = Duration::from_secs(10);
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let said = lines.clone();
    let story = example::run(
        config,
        &report,
        lease,
        Arc::new(move |line| said.lock().unwrap().push(line)),
    )
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
    // What the healthy workers said they published, by generation.
    let published: Vec<(&str, i64)> = lines
        .iter()
        .filter_map(|l| {
            let (name, generation) = l.split_once(": published under generation ")?;
            Some((name, generation.parse().ok()?))
        })
        .collect();
    match story.final_report {
        Publication::Found {
            generation, payload, ..
        } => {
            assert!(generation > story.stalled_generation, "{generation}: {lines:#?}");
            let (name, _) = published
                .iter()
                .find(|(_, g)| *g == generation)
                .unwrap_or_else(|| panic!("no worker said it published generation {generation}: {lines:#?}"));
            assert_ne!(*name, "worker-a", "{lines:#?}");
            assert_eq!(payload, format!("revenue report rebuilt by {name}"), "{lines:#?}");
        }
        other => panic!("no report was published: {other:?}\n{lines:#?}"),
    }
    db.drop().await;
}
