//! `run_fenced` on a live engine: a job longer than its lease publishes while
//! renewals work; when the lease is lost, or no renewal can reach the server
//! in time, the work is cancelled and nothing is published. The tests share
//! one database: each works on keys of its own.

use crate::support;

use std::io::Write;
use std::time::Duration;

use fencepost::client::{Fenced, Inspection, LostReason, Publication};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{SHORT, provisioned, warm_up, worker};
use support::proxy::Proxy;
use time::OffsetDateTime;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long the work waits to be cancelled before it gives up. It then
/// reports no cancel, which fails the test: a bound on when the cancel came is
/// asserted separately, and is much tighter.
const NEVER: Duration = Duration::from_secs(30);

/// Work that tells the test it started, then runs until cancelled and says
/// when it saw the cancel.
async fn until_cancelled(
    stop: CancellationToken,
    started: oneshot::Sender<()>,
    saw_cancel: oneshot::Sender<Instant>,
) -> Result<String, &'static str> {
    let _ = started.send(());
    tokio::select! {
        _ = stop.cancelled() => {
            let _ = saw_cancel.send(Instant::now());
            Ok("finished after cancellation: must not be published".into())
        }
        _ = tokio::time::sleep(NEVER) => Err("never cancelled"),
    }
}

/// The server clock at the local instant `at` (in the past), read on `conn`:
/// never earlier than the truth, since the server reads its clock after the
/// question is sent. Off by the time a query takes to reach the server.
async fn server_clock_at(conn: &mut fencepost::Connection, at: Instant) -> OffsetDateTime {
    let asked = Instant::now();
    let row = conn
        .simple_query("SELECT SYSUTCDATETIME();")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .expect("one row");
    let now = row.get::<time::PrimitiveDateTime, usize>(0).unwrap().assume_utc();
    now - (asked - at)
}

#[tokio::test]
async fn a_job_longer_than_its_lease_publishes_while_renewals_work() {
    let Some(db) = TestDatabase::shared("a_job_longer_than_its_lease_publishes_while_renewals_work").await else {
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
    const TEST: &str = "a_lease_fenced_out_by_an_operator_cancels_the_work_and_publishes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let key = provisioned(&client, "report").await;
    let (started, work_started) = oneshot::channel();
    let (saw_cancel_tx, saw_cancel) = oneshot::channel();
    let mut operator = db.connect().await;

    let run = tokio::spawn({
        let (client, key) = (client.clone(), key.clone());
        async move {
            client
                .run_fenced(&key, SHORT, |stop| until_cancelled(stop, started, saw_cancel_tx))
                .await
        }
    });
    work_started.await.unwrap();
    let forcing = Instant::now();
    support::exec(
        &mut operator,
        &format!("EXEC fence_admin.ForceRelease @ResourceKey = N'{key}';"),
    )
    .await;
    let forced = Instant::now();
    let outcome = run.await.unwrap().unwrap();
    let saw_cancel = saw_cancel.await.expect("the work never saw the cancel");

    assert!(matches!(outcome, Fenced::Lost(LostReason::Renewal)), "{outcome:?}");
    assert!(
        saw_cancel > forcing,
        "the work was cancelled before the lease was fenced out"
    );
    // Renewals are sent a third of the lease apart, so the first one sent
    // after the ForceRelease committed left within that time of its reply;
    // it answers Lost, and the work is cancelled on its answer.
    let renewal_interval = SHORT / 3;
    let waited = saw_cancel.saturating_duration_since(forced);
    assert!(
        waited <= renewal_interval + RENEWAL_ROUND_TRIP,
        "the work saw the cancel {waited:?} after the ForceRelease, more than a renewal interval \
         ({renewal_interval:?}) and a round trip later"
    );
    let _ = writeln!(
        std::io::stderr(),
        "{TEST}: the work saw the cancel {waited:?} after the ForceRelease answered (renewal interval \
         {renewal_interval:?})"
    );
    assert_eq!(
        client.read_publication(&key).await.unwrap(),
        Publication::NothingPublished
    );
    // Close the pools first: open sessions keep the database in use.
    drop((client, operator));
    db.drop().await;
}

/// What a warmed-up renewal may take, answer included, on a loaded test
/// machine.
const RENEWAL_ROUND_TRIP: Duration = Duration::from_millis(300);

#[tokio::test]
async fn a_renewal_that_cannot_reach_the_server_in_time_cancels_the_work_before_the_lease_ends() {
    const TEST: &str = "a_renewal_that_cannot_reach_the_server_in_time_cancels_the_work_before_the_lease_ends";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(1)
        .checkout_timeout(Duration::from_secs(1))
        .release_timeout(Duration::from_secs(1));
    let client = Client::connect_with(config).await.unwrap();
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&client), worker(&direct));
    let key = provisioned(&observer, "report").await;
    // A session of its own to read the server clock on, opened and used once
    // beforehand so that reading it costs only the query.
    let mut clock = db.connect().await;
    server_clock_at(&mut clock, Instant::now()).await;
    let (started, work_started) = oneshot::channel();
    let (saw_cancel_tx, saw_cancel) = oneshot::channel();

    let run = tokio::spawn({
        let (client, key) = (client.clone(), key.clone());
        async move {
            client
                .run_fenced(&key, SHORT, |stop| until_cancelled(stop, started, saw_cancel_tx))
                .await
        }
    });
    work_started.await.unwrap();
    // From here nothing the client sends reaches the server.
    let cut_at = Instant::now();
    proxy.hold_requests(true);
    let outcome = run.await.unwrap().unwrap();
    let returned_after = cut_at.elapsed();
    let saw_cancel = saw_cancel.await.expect("the work never saw the cancel");

    assert!(
        matches!(outcome, Fenced::Lost(LostReason::Unconfirmed { .. })),
        "{outcome:?}"
    );
    // The lease the server holds is the one the last renewal that got
    // through set. The work must have stopped before it ends, on the server's
    // clock, with no slack: read the server clock at the moment the work saw
    // the cancel (at the latest), and compare.
    let Inspection::Found(lease) = observer.inspect(&key).await.unwrap() else {
        panic!("{key} is provisioned")
    };
    let until = lease.lease_until.expect("the lease the client held");
    let cancelled = server_clock_at(&mut clock, saw_cancel).await;
    assert!(
        cancelled < until,
        "the work saw the cancel at {cancelled} on the server clock, the lease ended at {until}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "{TEST}: the work saw the cancel {:.1} ms before the lease ended, {:?} after the cut",
        (until - cancelled).whole_microseconds() as f64 / 1000.0,
        saw_cancel - cut_at
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
    drop((client, observer, clock));
    db.drop().await;
}
