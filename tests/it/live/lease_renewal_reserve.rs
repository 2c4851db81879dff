//! A guard's renewals have a connection of their own: with every ordinary
//! connection taken by the service's own long work, the lease is still kept.

use crate::support;

use std::time::Duration;

use fencepost::client::{FencedOutcome, Release};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, warm_up, worker};
use tokio::sync::oneshot;

#[tokio::test]
async fn a_guard_keeps_renewing_while_the_service_holds_every_ordinary_connection() {
    const TEST: &str = "a_guard_keeps_renewing_while_the_service_holds_every_ordinary_connection";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config
        .max_connections(1)
        .checkout_timeout(Duration::from_secs(1))
        .allow_privileged_login(true);
    let client = Client::connect_with(config).await.unwrap();
    // Warms up the ordinary connection and the renewals' one alike.
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&client), worker(&direct));
    let busy_key = provisioned(&observer, "busy").await;
    let guarded_key = provisioned(&observer, "guarded").await;
    let busy = acquired(client.acquire(&busy_key, Duration::from_secs(60)).await.unwrap());
    let length = Duration::from_secs(4);
    let lease = acquired(client.acquire(&guarded_key, length).await.unwrap());
    let first_deadline = lease.local_deadline();
    let guard = client.guard(lease);

    // The service's own work holds the one ordinary connection for two and
    // a half lease lengths: more than two renewal periods.
    let (started, work_started) = oneshot::channel();
    let (finish, work_may_finish) = oneshot::channel::<()>();
    let work = client.fenced_transaction_without_guard(&busy, async move |_tx| {
        let _ = started.send(());
        let _ = work_may_finish.await;
        Ok::<_, ()>(())
    });
    let watch = async {
        work_started.await.unwrap();
        tokio::time::sleep(length * 5 / 2).await;
        let lost = guard.lost_reason();
        let deadline = guard.lease().local_deadline();
        let _ = finish.send(());
        (lost, deadline)
    };
    let (work, (lost, deadline)) = tokio::join!(work, watch);
    assert!(matches!(work, Ok(FencedOutcome::Committed(()))), "{work:?}");
    assert_eq!(lost, None, "the guard gave up while its client's pool was busy");
    assert!(
        deadline > first_deadline + length,
        "fewer than two renewals were confirmed while the pool was busy"
    );
    let (_, held, _, _) = state(&observer, &guarded_key).await;
    assert!(held, "the guarded lease ended");
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}
