//! A guard's handover signal is let go of when the runtime its tasks ran on
//! shuts down while the client lives on (a service with a runtime per
//! component, one of them stopped): the session that held the signal's lock
//! is closed, never pooled again with the lock still taken, where every
//! waiter of the key would find the signal held by a guard that is gone.

use crate::support;

use std::time::Duration;

use fencepost::Client;
use fencepost::client::Release;
use support::TestDatabase;
use support::lease::{acquired, provisioned};
use support::signal::signal_held;
use tokio::sync::oneshot;
use tokio::time::Instant;

#[tokio::test]
async fn a_signal_raised_on_a_runtime_that_shut_down_is_let_go_of() {
    const TEST: &str = "a_signal_raised_on_a_runtime_that_shut_down_is_let_go_of";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    let mut observer = db.connect().await;
    let key = provisioned(&client, "abandoned").await;
    let lease = acquired(client.acquire(&key, Duration::from_secs(600)).await.unwrap());

    let (stop, stopped) = oneshot::channel::<()>();
    let other_runtime = std::thread::spawn({
        let (client, lease) = (client.clone(), lease.clone());
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let guard = client.guard(lease);
                tokio::spawn(async move {
                    let _held = guard;
                    std::future::pending::<()>().await
                });
                let _ = stopped.await;
            });
            // Every task of the runtime is dropped where it stands: the guard,
            // its renewals, and the task that holds the signal.
            drop(runtime);
        }
    });
    let raised_by = Instant::now() + Duration::from_secs(20);
    while !signal_held(&mut observer, &key).await {
        assert!(Instant::now() < raised_by, "the guard never raised its signal");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(()).unwrap();
    tokio::task::spawn_blocking(move || other_runtime.join().unwrap())
        .await
        .unwrap();

    // The server lets go of a closed session's lock as soon as it sees the
    // connection end.
    let let_go_by = Instant::now() + Duration::from_secs(10);
    while signal_held(&mut observer, &key).await {
        assert!(
            Instant::now() < let_go_by,
            "the signal stayed held by a pooled session after its guard's runtime shut down"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nothing of the stopped runtime released the lease either.
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}
