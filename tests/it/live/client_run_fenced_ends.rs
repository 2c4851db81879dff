//! How `run_fenced` ends when things go wrong around the work: the acquire's
//! reply is lost, the work ignores its cancel, or the caller drops the run.
//! The tests share one database: each works on keys of its own.

use crate::support;

use std::convert::Infallible;
use std::time::Duration;

use fencepost::client::Fenced;
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{provisioned, warm_up, worker};
use support::proxy::{Cut, Proxy};
use tokio::sync::oneshot;
use tokio::time::Instant;

#[tokio::test]
async fn an_acquire_whose_reply_was_lost_is_confirmed_with_the_same_owner() {
    let Some(db) = TestDatabase::shared("an_acquire_whose_reply_was_lost_is_confirmed_with_the_same_owner").await
    else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let client = worker(&proxy.ado(&db.ado())).await;
    let key = provisioned(&client, "lost-acquire").await;
    // The server grants the lease; the client never hears it. A fresh owner
    // on retry would find it Busy under an owner nobody knows.
    proxy.cut_next(Cut::BeforeReply);
    let fenced = client
        .run_fenced(&key, Duration::from_secs(30), |_| async {
            Ok::<_, Infallible>("result".to_string())
        })
        .await
        .unwrap();
    assert!(proxy.cuts() == 1, "the cut never happened");
    assert!(
        matches!(fenced, Fenced::Published { generation: 1, .. }),
        "the retry did not confirm the lost grant: {fenced:?}"
    );
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_work_that_ignores_its_cancel_is_dropped_after_the_grace() {
    let Some(db) = TestDatabase::shared("a_work_that_ignores_its_cancel_is_dropped_after_the_grace").await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.max_connections(1).cancel_grace(Duration::from_millis(500));
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;
    let key = provisioned(&client, "stubborn").await;
    let (started, work_started) = oneshot::channel();
    let (cancelled_tx, cancelled) = oneshot::channel();
    let grace = Duration::from_millis(500);
    let length = Duration::from_secs(3);

    let run = tokio::spawn({
        let (client, key) = (client.clone(), key.clone());
        async move {
            let ran = client
                .run_fenced(&key, length, |stop| async move {
                    // Only a task of its own notes when the token is
                    // cancelled; the work itself never looks at it.
                    tokio::spawn(async move {
                        stop.cancelled().await;
                        let _ = cancelled_tx.send(Instant::now());
                    });
                    let _ = started.send(());
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok::<_, Infallible>("too late".to_string())
                })
                .await;
            (ran, Instant::now())
        }
    });
    work_started.await.unwrap();
    db.exec(&format!("EXEC fence_admin.ForceRelease @ResourceKey = N'{key}';"))
        .await;
    let forced = Instant::now();
    // A renewal notices within a third of the lease; then the grace.
    let (ended, dropped) = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("run_fenced kept waiting for a work that ignores its cancel")
        .unwrap();
    let ended = ended.unwrap();
    let cancelled = cancelled.await.expect("the work's token was never cancelled");
    // The watcher notes the cancel when it next runs, a little after it:
    // a few milliseconds of scheduling, not a grace cut short.
    let after_cancel = dropped.saturating_duration_since(cancelled) + Duration::from_millis(20);
    assert!(
        after_cancel >= grace,
        "the work was dropped {after_cancel:?} after its cancel, before the {grace:?} grace"
    );
    let after_force = dropped.saturating_duration_since(forced);
    let latest = length / 3 + grace + Duration::from_secs(1);
    assert!(
        after_force >= grace && after_force <= latest,
        "the work was dropped {after_force:?} after the ForceRelease, not within {grace:?}..={latest:?}"
    );
    assert!(matches!(ended, Fenced::Lost(_)), "{ended:?}");
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn dropping_a_run_cancels_what_its_work_spawned() {
    let Some(db) = TestDatabase::shared("dropping_a_run_cancels_what_its_work_spawned").await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let key = provisioned(&client, "dropped").await;
    let (spawned, watcher) = oneshot::channel();

    let run = tokio::spawn({
        let (client, key) = (client.clone(), key.clone());
        async move {
            client
                .run_fenced(&key, Duration::from_secs(30), |stop| async move {
                    // A task of the work's own that stops when the lease does.
                    let _ = spawned.send(tokio::spawn(async move { stop.cancelled().await }));
                    std::future::pending::<Result<String, Infallible>>().await
                })
                .await
        }
    });
    let watcher = watcher.await.unwrap();
    run.abort();
    tokio::time::timeout(Duration::from_secs(5), watcher)
        .await
        .expect("the work's task never saw the run end")
        .unwrap();
    drop(client);
    db.drop().await;
}
