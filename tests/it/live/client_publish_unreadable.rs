//! A publish whose reply carries an `Outcome` the client cannot read (a
//! contract drift, an engine that answers the column NULL or of another
//! type) may well have committed: `Publish` commits before it answers. It is
//! an unknown outcome, never an error that reads "nothing was published".

use crate::support;

use std::convert::Infallible;
use std::time::Duration;

use fencepost::client::{AcquireSet, Error, Fenced, KeyPublish, OperationOutcome};
use fencepost::deploy::Sources;
use support::TestDatabase;
use support::lease::{acquired, provisioned, unwarmed};
use uuid::Uuid;

/// The shipped Publish, answering its outcome as NULL after its commit.
fn publish_answering_null() -> Sources {
    let shipped = Sources::embedded().unwrap();
    let text = shipped
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == "fence_api.Publish")
        .unwrap()
        .text()
        .to_string();
    let answer = "SELECT @Outcome AS Outcome;";
    assert_eq!(text.matches(answer).count(), 1, "Publish answers in one place");
    let drifted = text.replacen(answer, "SELECT CAST(NULL AS nvarchar(32)) AS Outcome;", 1);
    shipped.with_procedure("fence_api.Publish.sql", &drifted).unwrap()
}

#[tokio::test]
async fn a_committed_publish_whose_outcome_cannot_be_read_is_unknown_not_an_error() {
    const TEST: &str = "a_committed_publish_whose_outcome_cannot_be_read_is_unknown_not_an_error";
    let Some(db) = TestDatabase::new(TEST).await else {
        return;
    };
    db.migrate(&publish_answering_null())
        .await
        .expect("deploy with the drifted Publish");
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "unreadable").await;

    let lease = acquired(client.acquire(&key, Duration::from_secs(60)).await.unwrap());
    let operation = Uuid::new_v4();
    match client.publish(&lease, operation, "committed").await {
        Err(Error::OutcomeUnknown { operation_id, .. }) => assert_eq!(operation_id, operation),
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert!(
        matches!(
            client.outcome(operation).await.unwrap(),
            OperationOutcome::Published { .. }
        ),
        "the publish did not commit, so the test shows nothing"
    );

    let other = provisioned(&client, "unreadable-run").await;
    let run = client
        .run_fenced(&other, Duration::from_secs(2), |_| async {
            Ok::<_, Infallible>("committed".to_string())
        })
        .await;
    let Ok(Fenced::Unknown(unsettled)) = run else {
        panic!("expected Fenced::Unknown, got {run:?}");
    };
    assert!(matches!(
        client.outcome(unsettled.operation_id()).await.unwrap(),
        OperationOutcome::Published { .. }
    ));
    drop(client);
    db.drop().await;
}

/// The shipped PublishSet with its answer, written once, replaced by
/// `drifted`.
fn publish_set_answering(drifted: &str) -> Sources {
    let shipped = Sources::embedded().unwrap();
    let text = shipped
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == "fence_api.PublishSet")
        .unwrap()
        .text()
        .to_string();
    assert_eq!(text.matches(SET_ANSWER).count(), 1, "PublishSet answers in one place");
    let drifted = text.replacen(SET_ANSWER, drifted, 1);
    shipped.with_procedure("fence_api.PublishSet.sql", &drifted).unwrap()
}

/// How the shipped PublishSet answers, after its commit.
const SET_ANSWER: &str = "CAST(ResourceKey AS nvarchar(256)) AS ResourceKey\n      FROM @Set\n     ORDER BY LockOrder;";

/// A set of two provisioned keys held by `client`, and a publish for each.
async fn held_set(client: &fencepost::Client) -> (fencepost::client::LeaseSet, Vec<String>) {
    let keys = vec![
        provisioned(client, "unreadable-set").await,
        provisioned(client, "unreadable-set").await,
    ];
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let AcquireSet::Acquired(set) = client.acquire_set(&refs, Duration::from_secs(60)).await.unwrap() else {
        panic!("the set was not acquired");
    };
    (set, keys)
}

/// Publishes one payload per key and expects an unknown outcome whose
/// publishes all committed.
async fn expect_committed_but_unknown(client: &fencepost::Client, set: &fencepost::client::LeaseSet, keys: &[String]) {
    let publishes: Vec<KeyPublish<'_>> = keys
        .iter()
        .map(|key| KeyPublish {
            key,
            operation_id: Uuid::new_v4(),
            payload: "committed",
        })
        .collect();
    match client.publish_set(set, &publishes).await {
        Err(Error::OutcomeUnknown { operation_id, .. }) => {
            assert!(
                publishes.iter().any(|p| p.operation_id == operation_id),
                "{operation_id}"
            );
        }
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    for publish in &publishes {
        assert!(
            matches!(
                client.outcome(publish.operation_id).await.unwrap(),
                OperationOutcome::Published { .. }
            ),
            "the set publish did not commit, so the test shows nothing"
        );
    }
}

/// On a database whose PublishSet answers with `drifted` in place of its
/// answer: a set publish of two keys is an unknown outcome, and each of its
/// publishes committed.
async fn a_set_publish_answering(test: &str, drifted: &str) {
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    db.migrate(&publish_set_answering(drifted))
        .await
        .expect("deploy with the drifted PublishSet");
    let client = unwarmed(&db.ado()).await;
    let (set, keys) = held_set(&client).await;
    expect_committed_but_unknown(&client, &set, &keys).await;
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_committed_set_publish_followed_by_an_error_is_unknown_not_an_error() {
    let erring = format!("{SET_ANSWER}\n    RAISERROR('after the rows', 16, 1);");
    a_set_publish_answering(
        "a_committed_set_publish_followed_by_an_error_is_unknown_not_an_error",
        &erring,
    )
    .await;
}

#[tokio::test]
async fn a_committed_set_publish_whose_rows_cannot_be_read_is_unknown_not_an_error() {
    let no_key = SET_ANSWER.replace("CAST(ResourceKey AS", "CAST(NULL AS");
    a_set_publish_answering(
        "a_committed_set_publish_whose_rows_cannot_be_read_is_unknown_not_an_error",
        &no_key,
    )
    .await;
}
