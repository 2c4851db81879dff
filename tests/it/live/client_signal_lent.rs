//! A guard's last call on the session holding its signal (see
//! `client::signal_loan`), when something goes wrong around it: the runtime
//! shuts down right after, or the call's future is left unpolled past the
//! task's bound. The session lent must never go back to the pool holding the
//! other guards' signals, which nobody would let go of.

use crate::support;

use std::time::Duration;

use fencepost::client::Release;
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, warm_up};
use support::signal::{signal, signal_held, until_signal_held};
use tokio::time::Instant;

/// Two provisioned keys whose signals live on the same holder session.
async fn same_slot(client: &Client) -> (String, String) {
    let a = provisioned(client, "lend-a").await;
    let slot = signal(&a).bytes().last().unwrap() % 2;
    loop {
        let b = provisioned(client, "lend-b").await;
        if signal(&b).bytes().last().unwrap() % 2 == slot {
            return (a, b);
        }
    }
}

/// Whether the signal of `key` is let go of within `bound`, asked on
/// `observer` every 100 ms.
async fn let_go_within(observer: &mut fencepost::Connection, key: &str, bound: Duration) -> bool {
    let by = Instant::now() + bound;
    while Instant::now() < by {
        if !signal_held(observer, key).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A guard's release on the holder session it shares with another guard's
/// signal, then the runtime its tasks ran on shuts down `pause` later:
/// answers whether the other guard's signal was let go of within seconds
/// (the session must be closed, never pooled with the lock still held).
async fn shutdown_after_lent_release(test: &str, pause: Duration) -> bool {
    let Some(db) = TestDatabase::shared(test).await else {
        return true;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    let mut observer = db.connect().await;
    let (a, b) = same_slot(&client).await;
    let lease_a = acquired(client.acquire(&a, Duration::from_secs(600)).await.unwrap());
    let lease_b = acquired(client.acquire(&b, Duration::from_secs(600)).await.unwrap());
    let (go, go_rx) = tokio::sync::oneshot::channel::<()>();
    let other = std::thread::spawn({
        let client = client.clone();
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let released = runtime.block_on(async move {
                let ga = client.guard(lease_a);
                let gb = client.guard(lease_b);
                tokio::spawn(async move {
                    let _held = gb;
                    std::future::pending::<()>().await
                });
                let _ = go_rx.await;
                let r = ga.release().await.unwrap();
                tokio::time::sleep(pause).await;
                r
            });
            drop(runtime);
            released
        }
    });
    until_signal_held(&mut observer, &a).await;
    until_signal_held(&mut observer, &b).await;
    go.send(()).unwrap();
    let released = tokio::task::spawn_blocking(move || other.join().unwrap())
        .await
        .unwrap();
    assert_eq!(released, Release::Released);
    let let_go = let_go_within(&mut observer, &b, Duration::from_secs(8)).await;
    drop((client, observer));
    db.drop().await;
    let_go
}

#[tokio::test]
async fn a_runtime_that_shuts_down_right_after_a_guards_release_lets_go_of_the_other_signals_on_its_session() {
    let let_go = shutdown_after_lent_release(
        "a_runtime_that_shuts_down_right_after_a_guards_release_lets_go_of_the_other_signals_on_its_session",
        Duration::ZERO,
    )
    .await;
    assert!(
        let_go,
        "another guard's signal stayed held by a pooled session after the runtime shut down"
    );
}

#[tokio::test]
async fn a_runtime_that_shuts_down_a_while_after_a_guards_release_lets_go_of_the_other_signals_on_its_session() {
    let let_go = shutdown_after_lent_release(
        "a_runtime_that_shuts_down_a_while_after_a_guards_release_lets_go_of_the_other_signals_on_its_session",
        Duration::from_secs(3),
    )
    .await;
    assert!(let_go, "another guard's signal stayed held after the runtime shut down");
}

/// A guard's release left unpolled after its request was sent, for longer
/// than its task waits for the lent session (the call timeout, 1 s here,
/// and two more), then finished: the task has raised its other signals on a
/// new session meanwhile, and the old one must not go back to the pool
/// holding them.
#[tokio::test]
async fn a_guards_release_left_unpolled_past_its_bound_leaves_no_signal_held_on_a_pooled_session() {
    const TEST: &str = "a_guards_release_left_unpolled_past_its_bound_leaves_no_signal_held_on_a_pooled_session";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.call_timeout(Duration::from_secs(1));
    let client = Client::connect_with(config).await.unwrap();
    // Each procedure's first call on a session compiles it on Babelfish,
    // which on a busy machine outlasts the one-second timeout; the warm-up
    // tries again.
    warm_up(&client).await;
    let mut observer = db.connect().await;
    let (a, b) = same_slot(&client).await;
    let ga = client.guard(acquired(client.acquire(&a, Duration::from_secs(600)).await.unwrap()));
    let gb = client.guard(acquired(client.acquire(&b, Duration::from_secs(600)).await.unwrap()));
    until_signal_held(&mut observer, &a).await;
    until_signal_held(&mut observer, &b).await;
    let mut release = Box::pin(ga.release());
    // Polled until the request is surely sent (and answered on the wire);
    // a release that answered by then is not polled again.
    let early = tokio::time::timeout(Duration::from_millis(30), &mut release).await;
    tokio::time::sleep(Duration::from_millis(4000)).await;
    let _answer = match early {
        Ok(answer) => answer,
        Err(_) => release.await,
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // B's guard gives its lease back: its signal should be let go of.
    assert_eq!(gb.release().await.unwrap(), Release::Released);
    let let_go = let_go_within(&mut observer, &b, Duration::from_secs(8)).await;
    drop((client, observer));
    db.drop().await;
    assert!(let_go, "B's signal stays held after B's lease was released");
}
