//! Pooled connections left half-open by a failover (open at both ends,
//! silent both ways) must not cost a call, or a renewal, one full call
//! timeout each: the idle check has its own short bound, and once one idle
//! connection fails it, the others idle since before are not trusted either.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencepost::client::{FencedOutcome, Renew};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, warm_up};
use support::proxy::Proxy;
use tokio::sync::Barrier;

const POOLED: usize = 4;

#[tokio::test]
async fn a_call_after_every_pooled_connection_went_half_open_waits_one_idle_check_not_one_call_timeout_each() {
    let test = "a_call_after_every_pooled_connection_went_half_open_waits_one_idle_check_not_one_call_timeout_each";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    // Well above what a new session's first call costs a busy test engine,
    // and still far above the idle check's bound, which is what is asserted.
    let call_timeout = Duration::from_secs(15);
    let idle_check_after = Duration::from_millis(300);
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(POOLED as u32)
        .allow_privileged_login(true)
        .call_timeout(call_timeout)
        .idle_check_after(idle_check_after);
    let client = Client::connect_with(config).await.unwrap();
    // One connection for calls and the renewals' own.
    warm_up(&client).await;
    assert_eq!(proxy.connections(), 2);

    // Four fenced transactions that all wait for each other hold four
    // connections at once, so the pool has opened four.
    let mut leases = Vec::new();
    for n in 0..POOLED {
        let key = provisioned(&client, &format!("half-open-{n}")).await;
        leases.push(acquired(client.acquire(&key, Duration::from_secs(60)).await.unwrap()));
    }
    let barrier = Arc::new(Barrier::new(POOLED));
    let transactions = leases.iter().map(|lease| {
        let barrier = barrier.clone();
        let client = client.clone();
        async move {
            client
                .fenced_transaction_without_guard(lease, async |_tx| {
                    // A transaction that fails before the barrier leaves the
                    // others waiting at it: bounded, they fail too, and the
                    // outcomes show the first failure's own error.
                    tokio::time::timeout(Duration::from_secs(60), barrier.wait())
                        .await
                        .map(drop)
                        .map_err(|_| "another fenced transaction never reached the barrier")
                })
                .await
        }
    });
    let outcomes = futures_util::future::join_all(transactions).await;
    for outcome in outcomes {
        assert!(matches!(outcome, Ok(FencedOutcome::Committed(()))), "{outcome:?}");
    }
    assert_eq!(proxy.connections(), POOLED as u64 + 1, "four pooled connections");

    // All of them idle past the check threshold, then a failover leaves them
    // half-open; new connections work.
    tokio::time::sleep(idle_check_after * 2).await;
    proxy.hang_open_connections();
    let started = Instant::now();
    client.inspect(leases[0].key()).await.unwrap();
    let took = started.elapsed();
    // One idle check went to a half-open connection, and it cost one bound
    // (2 s by default) plus a new connection and its first call: checking
    // each connection in turn would send four and take four bounds.
    assert_eq!(proxy.swallowed(), 1, "idle checks sent to half-open connections");
    let idle_check = Duration::from_secs(2);
    assert!(
        took < idle_check * 3,
        "{took:?}: the half-open connections were each given a full bound"
    );
    assert_eq!(
        proxy.connections(),
        POOLED as u64 + 2,
        "one new connection served the call"
    );

    // The renewals' connection, idle since before the failed check, is
    // replaced without a check of its own.
    let mut lease = leases.swap_remove(0);
    let renewed = client.renew(&mut lease).await.unwrap();
    assert!(matches!(renewed, Renew::Renewed { .. }), "{renewed:?}");
    assert_eq!(proxy.swallowed(), 1, "the renewals' connection was checked too");
    assert_eq!(proxy.connections(), POOLED as u64 + 3);
    drop(client);
    db.drop().await;
}
