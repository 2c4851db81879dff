//! The client when the server stalls or goes away between calls: the
//! start-up check is bounded by `call_timeout` like every call, and a pooled
//! connection the server ended while it sat idle is replaced before a call
//! uses it, so a publish after a restart neither fails nor reports an
//! unknown outcome. The tests share one database: each works on keys of its
//! own, and ends only its own sessions.

use crate::support;

use std::time::{Duration, Instant};

use fencepost::client::{Error, Publish};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, warm_up};
use support::proxy::Proxy;
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(60);

fn config(ado: &str) -> ClientConfig {
    let mut config = ClientConfig::new(ConnectionString::parse(ado).expect("connection string"));
    config.max_connections(1).allow_privileged_login(true);
    config
}

#[tokio::test]
async fn verify_contract_with_its_reply_held_times_out_within_the_call_timeout() {
    let test = "verify_contract_with_its_reply_held_times_out_within_the_call_timeout";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    // Long enough for the catalog query on a fresh session of a busy engine.
    let call_timeout = Duration::from_secs(5);
    let mut config = config(&proxy.ado(&db.ado()));
    config.call_timeout(call_timeout);
    let client = Client::connect_with(config).await.unwrap();
    client.verify_contract().await.unwrap();

    proxy.hold_replies(true);
    let started = Instant::now();
    let result = client.verify_contract().await;
    let took = started.elapsed();
    proxy.hold_replies(false);
    match result {
        Err(Error::Network { timed_out: true, .. }) => {}
        other => panic!("expected a timed-out network error, got {other:?}"),
    }
    // Without its own bound the check waited for the driver's 30 s.
    assert!(took >= call_timeout, "{took:?}");
    assert!(took < call_timeout + Duration::from_millis(1500), "{took:?}");
    // The connection with the unread reply was dropped; the next check answers.
    client.verify_contract().await.unwrap();
    drop(client);
    db.drop().await;
}

/// Ends, from another session, every session whose application name is
/// `name`, as a server restart or an operator's KILL would. Returns how many.
async fn kill_sessions(db: &TestDatabase, name: &str) -> usize {
    let rows = db
        .query(&format!(
            "SELECT CAST(session_id AS int) FROM sys.dm_exec_sessions WHERE program_name = N'{name}'"
        ))
        .await;
    for row in &rows {
        let session: i32 = row.get(0).unwrap();
        db.exec(&format!("KILL {session};")).await;
    }
    rows.len()
}

#[tokio::test]
async fn a_publish_on_a_pooled_connection_the_server_ended_while_idle_succeeds() {
    let test = "a_publish_on_a_pooled_connection_the_server_ended_while_idle_succeeds";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let name = format!("fp-idle-{}", Uuid::new_v4().simple());
    let idle_check_after = Duration::from_millis(500);
    let mut config = config(&proxy.ado(&format!("{};Application Name={name}", db.ado())));
    config.idle_check_after(idle_check_after);
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;

    // In steady use a call is one request: no check before it.
    let key = provisioned(&client, "idle").await;
    let lease = acquired(client.acquire(&key, LEASE).await.unwrap());
    let before = proxy.requests();
    client.inspect(&key).await.unwrap();
    assert_eq!(proxy.requests(), before + 1, "a busy connection was checked");

    // The pooled session ends while idle, as in a restart.
    // The session for calls, and the renewals' own one (warm_up renewed).
    assert_eq!(kill_sessions(&db, &name).await, 2, "the client's two sessions");
    tokio::time::sleep(idle_check_after + Duration::from_millis(300)).await;
    let connections = proxy.connections();
    let published = client.publish(&lease, Uuid::new_v4(), "after the restart").await;
    assert_eq!(published.unwrap(), Publish::Published);
    assert_eq!(proxy.connections(), connections + 1, "the dead connection was replaced");
    drop(client);
    db.drop().await;
}
