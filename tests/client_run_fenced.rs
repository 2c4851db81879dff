//! `run_fenced` on a live engine: a job longer than its lease publishes while
//! renewals work; when the lease is lost, or no renewal can reach the server
//! in time, the work is cancelled and nothing is published.

mod client_support;
mod lease_support;
mod support;

use std::time::Duration;

use client_support::Proxy;
use fencepost::client::{Fenced, Inspection, LostReason, Publication};
use fencepost::{Client, ClientConfig, ConnectionString};
use lease_support::{SHORT, provisioned, warm_up, worker};
use support::TestDatabase;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long the work waits to be cancelled before the test calls it a failure.
const NEVER: Duration = Duration::from_secs(30);

/// Work that tells the test it started, then runs until cancelled.
async fn until_cancelled(stop: CancellationToken, started: oneshot::Sender<()>) -> Result<String, &'static str> {
    let _ = started.send(());
    tokio::select! {
        _ = stop.cancelled() => Ok("finished after cancellation: must not be published".into()),
        _ = tokio::time::sleep(NEVER) => Err("never cancelled"),
    }
}

#[tokio::test]
async fn a_job_longer_than_its_lease_publishes_while_renewals_work() {
    let Some(db) = TestDatabase::deployed("a_job_longer_than_its_lease_publishes_while_renewals_work").await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let key = provisioned(&client, "report").await;
    let job = SHORT * 3;

    let outcome = client
        .run_fenced(&key, SHORT, |stop| async move {
            tokio::select! {
                _ = tokio::time::sleep(job) => Ok("rebuilt".to_string()),
                _ = stop.cancelled() => Err("cancelled although renewals work"),
            }
        })
        .await
        .unwrap();

    let Fenced::Published { generation, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(matches!(
        client.read_publication(&key).await.unwrap(),
        Publication::Found { generation: g, payload, .. } if g == generation && payload == "rebuilt"
    ));
    // Released at the end: free for the next worker at once.
    assert!(matches!(client.inspect(&key).await.unwrap(), Inspection::Found(s) if !s.is_held));
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_lease_fenced_out_by_an_operator_cancels_the_work_and_publishes_nothing() {
    let Some(db) =
        TestDatabase::deployed("a_lease_fenced_out_by_an_operator_cancels_the_work_and_publishes_nothing").await
    else {
        return;
    };
    let client = worker(&db.ado()).await;
    let key = provisioned(&client, "report").await;
    let (started, work_started) = oneshot::channel();

    let run = tokio::spawn({
        let (client, key) = (client.clone(), key.clone());
        async move {
            client
                .run_fenced(&key, SHORT, |stop| until_cancelled(stop, started))
                .await
        }
    });
    work_started.await.unwrap();
    db.exec(&format!("EXEC fence_admin.ForceRelease @ResourceKey = N'{key}';"))
        .await;
    let outcome = run.await.unwrap().unwrap();

    assert!(matches!(outcome, Fenced::Lost(LostReason::Renewal)), "{outcome:?}");
    assert_eq!(
        client.read_publication(&key).await.unwrap(),
        Publication::NothingPublished
    );
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_renewal_that_cannot_reach_the_server_in_time_cancels_the_work_before_the_lease_ends() {
    let Some(db) =
        TestDatabase::deployed("a_renewal_that_cannot_reach_the_server_in_time_cancels_the_work_before_the_lease_ends")
            .await
    else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(1)
        .checkout_timeout(Duration::from_secs(1))
        .release_timeout(Duration::from_secs(1));
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;
    let observer = worker(&db.ado()).await;
    let key = provisioned(&observer, "report").await;
    let (started, work_started) = oneshot::channel();
    let (cancelled_tx, cancelled_at) = oneshot::channel();

    let run = tokio::spawn({
        let (client, key) = (client.clone(), key.clone());
        async move {
            client
                .run_fenced(&key, SHORT, |stop| async move {
                    let result = until_cancelled(stop, started).await;
                    let _ = cancelled_tx.send(Instant::now());
                    result
                })
                .await
        }
    });
    work_started.await.unwrap();
    // From here nothing the client sends reaches the server.
    let cut_at = Instant::now();
    proxy.hold_requests(true);
    let outcome = run.await.unwrap().unwrap();
    let returned_after = cut_at.elapsed();
    let cancelled_after = cancelled_at.await.unwrap() - cut_at;

    assert!(
        matches!(outcome, Fenced::Lost(LostReason::Unconfirmed { .. })),
        "{outcome:?}"
    );
    // The last renewal that got through was sent before the cut, so the lease
    // could not outlast the cut by more than its length: the work must have
    // been stopped by then (with a little slack for scheduling).
    assert!(
        cancelled_after <= SHORT + Duration::from_millis(250),
        "cancelled {cancelled_after:?} after the cut"
    );
    // The release that cannot get through is bounded and does not fail the call.
    assert!(
        returned_after <= SHORT + Duration::from_secs(3),
        "returned {returned_after:?} after the cut"
    );
    assert_eq!(
        observer.read_publication(&key).await.unwrap(),
        Publication::NothingPublished
    );
    // Close the pools first: open sessions keep the database in use.
    drop((client, observer));
    db.drop().await;
}
