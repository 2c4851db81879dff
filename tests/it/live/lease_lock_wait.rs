//! A lease is judged when its row is locked, not when the call was sent
//! (contract v1.1). A caller's transaction holds the fence row past the end of
//! the lease; the Renew and Publish that waited for the row answer `Lost` and
//! `Expired`, and revive nothing. The tests share one database: each works
//! on keys and operation ids of its own.

use crate::support;

use std::time::Duration;

use support::caller::{Caller, READ_PUBLICATION};
use support::proxy::Proxy;
use support::{TestDatabase, connect_ado};
use uuid::Uuid;

/// Waits until the proxy has forwarded `requests` requests: they reached the server.
async fn reached(proxy: &Proxy, requests: u64) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while proxy.requests() < requests {
        assert!(
            tokio::time::Instant::now() < give_up,
            "only {} of {requests} requests reached the server",
            proxy.requests()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn calls_that_waited_for_the_row_past_the_lease_end_are_refused() {
    let Some(db) = TestDatabase::shared("calls_that_waited_for_the_row_past_the_lease_end_are_refused").await else {
        return;
    };
    let mut holder = Caller::new(db.connect().await);
    // The waiting calls go through a proxy that counts what reached the server.
    let proxy = Proxy::start(db.connection_string().server()).await;
    let through = proxy.ado(&db.ado());
    let (mut renewer, mut publisher) = (
        Caller::new(connect_ado(&through).await),
        Caller::new(connect_ado(&through).await),
    );
    let key = format!("wait:{}", Uuid::new_v4().simple());
    let provision = holder
        .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key.as_str()])
        .await;
    assert_eq!(provision.outcome(), "Created");
    let owner = Uuid::new_v4();
    let acquired = holder.acquire(&key, owner, 30).await;
    assert_eq!(acquired.outcome(), "Acquired");
    let generation = acquired.big("Generation").unwrap();
    // Each session pays its first compilation of a procedure now, not while
    // the lease is running out.
    for caller in [&mut renewer, &mut publisher] {
        assert_eq!(caller.inspect(&key).await.outcome(), "Found");
        assert_eq!(
            caller.renew(&key, Uuid::new_v4(), generation, 1).await.outcome(),
            "Lost"
        );
        let other = caller
            .publish(&key, Uuid::new_v4(), generation, Uuid::new_v4(), "x")
            .await;
        assert_eq!(other.outcome(), "Superseded");
    }

    // The holder's own transaction renews for two seconds and keeps the row
    // locked, uncommitted, past them.
    holder.begin("READ COMMITTED").await.unwrap();
    let renewed = holder.renew(&key, owner, generation, 2).await;
    assert_eq!(renewed.outcome(), "Renewed");
    let until = renewed.time("LeaseUntilUtc").unwrap();
    let sent = proxy.requests();

    let renew = tokio::spawn({
        let key = key.clone();
        async move { renewer.renew(&key, owner, generation, 30).await }
    });
    let publish = tokio::spawn({
        let key = key.clone();
        async move { publisher.publish(&key, owner, generation, Uuid::new_v4(), "late").await }
    });
    // Both calls reached the server while the lease still ran: a call that
    // arrived after its end would be refused without having waited at all.
    reached(&proxy, sent + 2).await;
    let arrived_by = holder.server_now().await;
    assert!(
        arrived_by < until,
        "the calls reached the server only at {arrived_by}, after the lease's end {until}"
    );
    // Hold the row until the server clock is past the lease's end.
    while holder.server_now().await <= until + time::Duration::milliseconds(200) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !renew.is_finished() && !publish.is_finished(),
        "the calls did not wait for the row the holder's transaction locked"
    );
    holder.commit().await.unwrap();
    let renew = renew.await.unwrap();
    let publish = publish.await.unwrap();

    assert_eq!(
        renew.outcome(),
        "Lost",
        "a renew that waited past the end revived the lease"
    );
    assert_eq!(
        publish.outcome(),
        "Expired",
        "a publish that waited past the end was accepted"
    );
    let state = holder.inspect(&key).await;
    assert_eq!(state.time("LeaseUntilUtc"), Some(until), "the lease was extended");
    assert_eq!(state.big("Generation"), Some(generation));
    let read = holder.call(READ_PUBLICATION, &[&key.as_str()]).await;
    assert_eq!(read.big("PublishedGeneration"), None, "something was published");
    drop(holder);
    db.drop().await;
}

/// One operation id published to two keys at once: the one that commits first
/// wins, and the other is error 50107, decided under the lock. Never
/// `AlreadyPublished` for another key's publish, never a duplicate-key error.
#[tokio::test]
async fn an_operation_id_raced_onto_two_keys_is_50107_for_the_loser() {
    let Some(db) = TestDatabase::shared("an_operation_id_raced_onto_two_keys_is_50107_for_the_loser").await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (mut first, mut second) = (
        Caller::new(db.connect().await),
        Caller::new(connect_ado(&proxy.ado(&db.ado())).await),
    );
    let mut leases = Vec::new();
    for name in ["one", "two"] {
        let key = format!("{name}:{}", Uuid::new_v4().simple());
        let provision = first
            .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key.as_str()])
            .await;
        assert_eq!(provision.outcome(), "Created");
        let owner = Uuid::new_v4();
        let acquired = first.acquire(&key, owner, 60).await;
        leases.push((key, owner, acquired.big("Generation").unwrap()));
    }
    // Both sessions compile Publish before the race.
    for caller in [&mut first, &mut second] {
        let warm = caller
            .publish(&leases[0].0, Uuid::new_v4(), 99, Uuid::new_v4(), "x")
            .await;
        assert_eq!(warm.outcome(), "Superseded");
    }
    let operation = Uuid::new_v4();

    first.begin("READ COMMITTED").await.unwrap();
    let (key, owner, generation) = leases[0].clone();
    let won = first.publish(&key, owner, generation, operation, "first").await;
    assert_eq!(won.outcome(), "Published");
    let sent = proxy.requests();
    let raced = tokio::spawn({
        let (key, owner, generation) = leases[1].clone();
        async move { second.publish(&key, owner, generation, operation, "second").await }
    });
    // The second publish reached the server before the first committed.
    reached(&proxy, sent + 1).await;
    assert!(
        !raced.is_finished(),
        "the second publish did not wait for the first to commit"
    );
    first.commit().await.unwrap();
    let lost = raced.await.unwrap();

    assert_eq!(lost.error_number(), Some(50107), "{lost:?}");
    let read = first.call(READ_PUBLICATION, &[&leases[1].0.as_str()]).await;
    assert_eq!(read.big("PublishedGeneration"), None, "the loser published");
    drop(first);
    db.drop().await;
}
