//! The client adds no round trip: every lease operation is one request on the
//! wire. Counted by a proxy between client and engine, not by the client.

use crate::support;

use std::convert::Infallible;
use std::time::Duration;

use fencepost::client::{Fenced, Publish, Release};
use support::TestDatabase;
use support::lease::{SHORT, acquired, provisioned, worker};
use support::proxy::Proxy;
use uuid::Uuid;

/// Runs `operation` and returns how many requests and messages it sent.
macro_rules! sent {
    ($proxy:expr, $operation:expr) => {{
        let (requests, messages) = ($proxy.requests(), $proxy.messages());
        let value = $operation;
        (($proxy.requests() - requests, $proxy.messages() - messages), value)
    }};
}

#[tokio::test]
async fn each_lease_operation_is_one_procedure_call() {
    let Some(db) = TestDatabase::shared("each_lease_operation_is_one_procedure_call").await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    // Warm-up opens the pool's one connection and runs every procedure once,
    // so what follows is counted on an open, warm session.
    let client = worker(&proxy.ado(&db.ado())).await;
    let key = provisioned(&client, "report").await;

    let mut counted = Vec::new();
    let (n, answer) = sent!(proxy, client.acquire(&key, SHORT * 5).await.unwrap());
    counted.push(("acquire", n));
    let mut lease = acquired(answer);
    let (n, _) = sent!(proxy, client.renew(&mut lease).await.unwrap());
    counted.push(("renew", n));
    let operation = Uuid::new_v4();
    let (n, published) = sent!(proxy, client.publish(&lease, operation, "x").await.unwrap());
    assert_eq!(published, Publish::Published);
    counted.push(("publish", n));
    let (n, _) = sent!(proxy, client.release(&lease).await.unwrap());
    counted.push(("release", n));
    let (n, _) = sent!(proxy, client.provision(&key).await.unwrap());
    counted.push(("provision", n));
    let (n, _) = sent!(proxy, client.inspect(&key).await.unwrap());
    counted.push(("inspect", n));
    let (n, _) = sent!(proxy, client.read_publication(&key).await.unwrap());
    counted.push(("read_publication", n));
    let (n, _) = sent!(proxy, client.outcome(operation).await.unwrap());
    counted.push(("outcome", n));
    let (n, answer) = sent!(
        proxy,
        client
            .acquire_waiting(&key, SHORT, Duration::from_secs(5))
            .await
            .unwrap()
    );
    counted.push(("acquire_waiting on a free lease", n));
    assert_eq!(client.release(&acquired(answer)).await.unwrap(), Release::Released);

    eprintln!("requests, messages per operation: {counted:?}");
    for (operation, sent) in &counted {
        assert_eq!(*sent, (1, 1), "{operation} sent {sent:?} (requests, messages)");
    }

    // run_fenced around work shorter than a renewal period: acquire, and a
    // publish that releases in the same call, nothing else.
    let ((requests, messages), outcome) = sent!(
        proxy,
        client
            .run_fenced(&key, SHORT * 5, |_| async { Ok::<_, Infallible>("quick".to_string()) })
            .await
            .unwrap()
    );
    eprintln!("run_fenced with quick work: {requests} requests, {messages} messages");
    assert!(matches!(outcome, Fenced::Published { .. }), "{outcome:?}");
    assert_eq!((requests, messages), (2, 2));

    // A fenced transaction: the lease is asserted as it begins (the BEGIN,
    // then AssertHolder with the record of the transaction) and again in the
    // request that commits, which costs no request of its own.
    let (begin, statement, commit) = {
        let lease = acquired(client.acquire(&key, SHORT * 5).await.unwrap());
        let ((begin, _), begun) = sent!(proxy, client.begin_fenced_without_guard(&lease).await.unwrap());
        let mut tx = match begun {
            fencepost::client::BeginFenced::Holding(tx) => tx,
            other => panic!("expected Holding, got {other:?}"),
        };
        let ((statement, _), _) = sent!(proxy, tx.query("SELECT 1", &[]).await.unwrap());
        let ((commit, _), ()) = sent!(proxy, tx.commit().await.unwrap());
        assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
        (begin, statement, commit)
    };
    eprintln!("fenced transaction: begin {begin}, statement {statement}, commit {commit} requests");
    assert_eq!((begin, statement, commit), (2, 1, 1));
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}
