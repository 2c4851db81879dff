//! The client's side of contract v1.4: versioned publishes, `run_fenced` with
//! a [`Built`] result, versioned fenced transactions, and the version in what
//! readers see. Each test uses keys of its own in the binary's shared database.

use crate::support;

use std::convert::Infallible;
use std::time::Duration;

use fencepost::client::{
    BeginFenced, Built, Fenced, FencedOutcome, Inspection, OperationOutcome, Parameter, Publication, Publish,
    RefusalReason,
};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, json, lease_cli, provisioned};
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(60);

async fn client(db: &TestDatabase) -> Client {
    Client::connect_with(ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap()))
        .await
        .expect("client connects")
}

/// Whether the lease is held, and the resource's source version.
async fn held_and_version(client: &Client, key: &str) -> (bool, Option<i64>) {
    match client.inspect(key).await.unwrap() {
        Inspection::Found(state) => (state.is_held, state.source_version),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_versioned_publish_from_an_older_source_is_stale_and_keeps_the_lease() {
    const TEST: &str = "a_versioned_publish_from_an_older_source_is_stale_and_keeps_the_lease";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "versioned").await;
    let first = acquired(client.acquire(&key, LONG).await.unwrap());
    let published = Uuid::new_v4();
    assert_eq!(
        client
            .publish_versioned_and_release(&first, published, "from 5", 5)
            .await
            .unwrap(),
        Publish::Published
    );

    let second = acquired(client.acquire(&key, LONG).await.unwrap());
    assert_eq!(
        client
            .publish_versioned_and_release(&second, Uuid::new_v4(), "from 4", 4)
            .await
            .unwrap(),
        Publish::Refused(RefusalReason::StaleSource)
    );
    assert_eq!(held_and_version(&client, &key).await, (true, Some(5)));
    let Publication::Found {
        payload,
        source_version,
        generation,
        ..
    } = client.read_publication(&key).await.unwrap()
    else {
        panic!("nothing published")
    };
    assert_eq!(
        (payload.as_str(), source_version, generation),
        ("from 5", Some(5), first.generation())
    );
    let OperationOutcome::Published { source_version, .. } = client.outcome(published).await.unwrap() else {
        panic!("the first publish is not recorded")
    };
    assert_eq!(source_version, Some(5));

    // A negative version is the client's own refusal, before any round trip.
    let error = client
        .publish_versioned(&second, Uuid::new_v4(), "x", -1)
        .await
        .unwrap_err();
    assert_eq!(error.parameter(), Some(Parameter::SourceVersion), "{error}");
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn run_fenced_refuses_a_result_from_an_older_source_and_releases() {
    const TEST: &str = "run_fenced_refuses_a_result_from_an_older_source_and_releases";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "run-versioned").await;
    let newer = client
        .run_fenced(&key, LONG, |_| async {
            Ok::<_, Infallible>(Built::from_source("offset 10", 10))
        })
        .await
        .unwrap();
    assert!(matches!(newer, Fenced::Published { .. }), "{newer:?}");

    let older = client
        .run_fenced(&key, LONG, |_| async {
            Ok::<_, Infallible>(Built::from_source("offset 8", 8))
        })
        .await
        .unwrap();
    assert!(
        matches!(older, Fenced::Refused(RefusalReason::StaleSource)),
        "{older:?}"
    );
    // run_fenced gives the lease back after StaleSource, which keeps it.
    assert_eq!(held_and_version(&client, &key).await, (false, Some(10)));

    // A plain String result publishes without a version.
    let plain = client
        .run_fenced(&key, LONG, |_| async { Ok::<_, Infallible>("unversioned".to_string()) })
        .await
        .unwrap();
    assert!(matches!(plain, Fenced::Published { .. }), "{plain:?}");
    let Publication::Found { source_version, .. } = client.read_publication(&key).await.unwrap() else {
        panic!("nothing published")
    };
    assert_eq!(source_version, None);
    assert_eq!(held_and_version(&client, &key).await, (false, Some(10)));
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_versioned_fenced_transaction_raises_the_version_only_when_it_commits() {
    const TEST: &str = "a_versioned_fenced_transaction_raises_the_version_only_when_it_commits";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "tx-versioned").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());

    let failed = client
        .fenced_transaction_versioned_without_guard(&lease, 3, async |_tx| Err::<(), _>("the work failed"))
        .await
        .unwrap();
    assert!(matches!(failed, FencedOutcome::Failed("the work failed")), "{failed:?}");
    assert_eq!(held_and_version(&client, &key).await, (true, None));

    let committed = client
        .fenced_transaction_versioned_without_guard(&lease, 3, async |_tx| Ok::<_, Infallible>(()))
        .await
        .unwrap();
    assert!(matches!(committed, FencedOutcome::Committed(())), "{committed:?}");
    assert_eq!(held_and_version(&client, &key).await, (true, Some(3)));

    let mut ran = false;
    let stale = client
        .fenced_transaction_versioned_without_guard(&lease, 2, async |_tx| {
            ran = true;
            Ok::<_, Infallible>(())
        })
        .await
        .unwrap();
    assert!(
        matches!(stale, FencedOutcome::Refused(RefusalReason::StaleSource)),
        "{stale:?}"
    );
    assert!(!ran, "the work ran on a stale source");
    let begun = client.begin_fenced_versioned_without_guard(&lease, 2).await.unwrap();
    assert!(
        matches!(begun, BeginFenced::Refused(RefusalReason::StaleSource)),
        "{begun:?}"
    );
    drop(begun);

    // The publish that follows is judged against the committed write's version.
    assert_eq!(
        client
            .publish_versioned(&lease, Uuid::new_v4(), "from 2", 2)
            .await
            .unwrap(),
        Publish::Refused(RefusalReason::StaleSource)
    );
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn the_lease_commands_show_and_reset_the_source_version() {
    const TEST: &str = "the_lease_commands_show_and_reset_the_source_version";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "cli-versioned").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    assert_eq!(
        client
            .publish_versioned_and_release(&lease, Uuid::new_v4(), "from 5", 5)
            .await
            .unwrap(),
        Publish::Published
    );

    let inspected = json(&lease_cli(&["inspect", &key, "--format", "json"], &db.ado()).await);
    assert_eq!(inspected["lease"]["source_version"], 5, "{inspected}");
    let text = lease_cli(&["inspect", &key], &db.ado()).await;
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("source version 5"),
        "{text:?}"
    );
    let history = json(&lease_cli(&["history", &key, "--format", "json"], &db.ado()).await);
    assert_eq!(history["tenures"][0]["source_version"], 5, "{history}");
    let listed = json(&lease_cli(&["list", "--prefix", &key, "--format", "json"], &db.ado()).await);
    assert_eq!(listed["leases"][0]["source_version"], 5, "{listed}");

    let reset = lease_cli(&["reset-source-version", &key, "1", "--format", "json"], &db.ado()).await;
    assert_eq!(reset.status.code(), Some(0), "{reset:?}");
    let reset = json(&reset);
    assert_eq!(
        (
            &reset["outcome"],
            &reset["previous_source_version"],
            &reset["source_version"]
        ),
        (&"Reset".into(), &5.into(), &1.into()),
        "{reset}"
    );
    let cleared = lease_cli(&["reset-source-version", &key], &db.ado()).await;
    assert_eq!(cleared.status.code(), Some(0), "{cleared:?}");
    assert_eq!(
        String::from_utf8_lossy(&cleared.stdout).trim(),
        format!("{key}: source version cleared (was 1)")
    );
    let inspected = json(&lease_cli(&["inspect", &key, "--format", "json"], &db.ado()).await);
    assert_eq!(
        inspected["lease"]["source_version"],
        serde_json::Value::Null,
        "{inspected}"
    );

    // A negative version is refused before any call; an unknown key exits 1.
    let negative = lease_cli(&["reset-source-version", &key, "--", "-1"], &db.ado()).await;
    assert_eq!(negative.status.code(), Some(2), "{negative:?}");
    assert!(
        String::from_utf8_lossy(&negative.stderr).contains("VERSION"),
        "{negative:?}"
    );
    let unknown = lease_cli(&["reset-source-version", "cli-versioned:never", "3"], &db.ado()).await;
    assert_eq!(unknown.status.code(), Some(1), "{unknown:?}");
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_guard_publishes_versioned_and_keeps_its_lease_after_stale_source() {
    const TEST: &str = "a_guard_publishes_versioned_and_keeps_its_lease_after_stale_source";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "guard-versioned").await;
    let guard = client.guard(acquired(client.acquire(&key, LONG).await.unwrap()));
    assert_eq!(
        guard.publish_versioned(Uuid::new_v4(), "from 7", 7).await.unwrap(),
        Publish::Published
    );
    assert_eq!(guard.release().await.unwrap(), fencepost::client::Release::Released);

    let guard = client.guard(acquired(client.acquire(&key, LONG).await.unwrap()));
    let refused = guard
        .publish_versioned_and_release(Uuid::new_v4(), "from 6", 6)
        .await
        .unwrap();
    assert_eq!(refused, Publish::Refused(RefusalReason::StaleSource));
    // The refused guard's lease is released in the background, as after any
    // refusal; the next holder publishes from a newer source.
    let mut attempts = 0;
    let next = loop {
        match client.acquire(&key, LONG).await.unwrap() {
            fencepost::client::Acquire::Acquired(lease) => break lease,
            busy => {
                attempts += 1;
                assert!(attempts < 100, "the refused guard's lease was never released: {busy:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(
        client
            .publish_versioned_and_release(&next, Uuid::new_v4(), "from 8", 8)
            .await
            .unwrap(),
        Publish::Published
    );
    assert_eq!(held_and_version(&client, &key).await, (false, Some(8)));
    drop(client);
    db.drop().await;
}
