//! The operators' calls when the connection breaks: `Admin::force_release`
//! and `reset_source_version` send one operation id per command and, when a
//! reply is lost, replay it once on a new connection, so the command applies
//! once and answers what it did. When no replay answers either, the error
//! carries the id, and the same id settles it later without fencing a holder
//! that acquired meanwhile. The tests share one database: each works on keys
//! of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::admin::{ForceRelease, ResetSourceVersion};
use fencepost::client::{Error, Publish, Renew};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, warm_up, worker};
use support::proxy::{Cut, Proxy};
use uuid::Uuid;

const CUTS: [Cut; 3] = [Cut::BeforeRequest, Cut::BeforeReply, Cut::MidReply];
const LEASE: Duration = Duration::from_secs(60);

/// Tenures of `key` that an operator ended.
async fn force_released(db: &TestDatabase, key: &str) -> i32 {
    let rows = db
        .query(&format!(
            "SELECT COUNT(*) FROM fence.Tenure WHERE ResourceKey = N'{key}' AND Ending = N'ForceReleased'"
        ))
        .await;
    rows[0].get::<i32, _>(0).unwrap()
}

#[tokio::test]
async fn an_operator_command_cut_anywhere_is_replayed_with_its_operation_id_and_applies_once() {
    const TEST: &str = "an_operator_command_cut_anywhere_is_replayed_with_its_operation_id_and_applies_once";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let client = worker(&proxy.ado(&db.ado())).await;
    let admin = client.admin();
    for cut in CUTS {
        let key = provisioned(&client, "operator-cut").await;
        let lease = acquired(client.acquire(&key, LEASE).await.unwrap());
        let published = client
            .publish_versioned_and_release(&lease, Uuid::new_v4(), "built from 100", 100)
            .await
            .unwrap();
        assert_eq!(published, Publish::Published);
        let held = acquired(client.acquire(&key, LEASE).await.unwrap());

        proxy.cut_next(cut);
        let fenced = admin.force_release(&key).await;
        assert!(!proxy.cut_pending(), "{cut:?}: the cut never happened");
        assert_eq!(
            fenced.unwrap(),
            ForceRelease::Fenced {
                generation: held.generation() + 1
            },
            "{cut:?}"
        );
        assert_eq!(
            state(&client, &key).await.0,
            held.generation() + 1,
            "{cut:?}: fenced once"
        );
        assert_eq!(force_released(&db, &key).await, 1, "{cut:?}");

        // A second reset would answer 0 as the previous version: the replay
        // answers the first one's 100.
        proxy.cut_next(cut);
        let reset = admin.reset_source_version(&key, Some(0)).await;
        assert!(!proxy.cut_pending(), "{cut:?}: the cut never happened");
        assert_eq!(
            reset.unwrap(),
            ResetSourceVersion::Reset { previous: Some(100) },
            "{cut:?}"
        );
    }
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_force_release_whose_every_reply_is_lost_is_unknown_and_its_operation_id_settles_it() {
    const TEST: &str = "a_force_release_whose_every_reply_is_lost_is_unknown_and_its_operation_id_settles_it";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(1)
        // The replay's budget: what the first call left of it.
        .call_timeout(Duration::from_secs(4))
        .checkout_timeout(Duration::from_secs(2));
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;
    let service = worker(&db.ado()).await;
    let key = provisioned(&service, "operator-lost").await;
    let stuck = acquired(service.acquire(&key, LEASE).await.unwrap());

    // The command reaches the server and commits; its reply is cut, and no
    // new connection signs in for the replay within the call's budget.
    let operation = Uuid::new_v4();
    proxy.cut_next(Cut::BeforeReply);
    proxy.hold_replies(true);
    let started = tokio::time::Instant::now();
    let error = client.admin().force_release_as(&key, operation).await.unwrap_err();
    let took = started.elapsed();
    proxy.hold_replies(false);
    assert!(
        matches!(&error, Error::OperatorOutcomeUnknown { operation_id, .. } if *operation_id == operation),
        "{error:?}"
    );
    assert_eq!(error.unknown_operation(), Some(operation));
    assert!(
        !error.is_transient(),
        "a retry with a new operation id could fence twice"
    );
    assert!(
        took < Duration::from_secs(6),
        "the replay outlived the call's budget: {took:?}"
    );

    // A service acquires meanwhile; the operator settles the command with its
    // id, which answers the first call's generation and fences nobody new.
    let successor = acquired(service.acquire(&key, LEASE).await.unwrap());
    assert_eq!(successor.generation(), stuck.generation() + 2);
    let settled = client.admin().force_release_as(&key, operation).await.unwrap();
    assert_eq!(
        settled,
        ForceRelease::Fenced {
            generation: stuck.generation() + 1
        }
    );
    let mut successor = successor;
    assert!(matches!(
        service.renew(&mut successor).await.unwrap(),
        Renew::Renewed { .. }
    ));
    assert_eq!(force_released(&db, &key).await, 1);
    drop((client, service));
    db.drop().await;
}
