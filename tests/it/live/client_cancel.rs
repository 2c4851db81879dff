//! A call that runs out of time is stopped on the server, not only
//! abandoned by the client: a publish queued on the fence row's lock behind
//! another transaction would otherwise commit once that transaction ends,
//! after its caller was told the outcome is unknown and may have moved on.

use crate::support;

use std::time::Duration;

use fencepost::client::{Error, OperationOutcome, Publication};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::babelfish_postgres::{postgres_or_skip, psql};
use support::caller::Caller;
use support::lease::{acquired, provisioned, warm_up, worker};
use uuid::Uuid;

const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

/// Sessions named `application` waiting for a lock, read on the engine's
/// PostgreSQL side: the only place that still sees a request the client
/// gave up on.
fn lock_waiters(url: &str, application: &str) -> usize {
    psql(
        url,
        &format!(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = '{application}';"
        ),
    )
    .trim()
    .parse()
    .expect("a count")
}

#[tokio::test]
async fn a_publish_that_runs_out_of_time_on_the_row_lock_is_stopped_and_never_commits_later() {
    let test = "a_publish_that_runs_out_of_time_on_the_row_lock_is_stopped_and_never_commits_later";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let Some(postgres) = postgres_or_skip(test) else {
        db.drop().await;
        return;
    };
    let observer = worker(&db.ado()).await;
    let application = format!("fp-cancel-{}", Uuid::new_v4().simple());
    let mut connection_string = ConnectionString::parse(&db.ado()).unwrap();
    connection_string.set_application_name(&application);
    let mut config = ClientConfig::new(connection_string);
    // Long enough for a new session's first calls to compile on a busy
    // engine (the warm-up's), short enough to run out behind the blocker.
    config.max_connections(1).call_timeout(Duration::from_secs(5));
    let publisher = Client::connect_with(config).await.unwrap();
    warm_up(&publisher).await;
    let key = provisioned(&observer, "queued").await;
    let lease = acquired(publisher.acquire(&key, Duration::from_secs(60)).await.unwrap());

    // The holder's own transaction holds the fence row, as a fenced
    // transaction of the service does.
    let mut blocker = Caller::new(db.connect().await);
    blocker.begin("READ COMMITTED").await.unwrap();
    let holding = blocker
        .call(ASSERT, &[&key.as_str(), &lease.owner(), &lease.generation()])
        .await;
    assert_eq!(holding.outcome(), "Holding");
    assert_eq!(
        lock_waiters(&postgres, &application),
        0,
        "another session already waits"
    );

    let operation = Uuid::new_v4();
    let queued = publisher.publish(&lease, operation, "queued").await;
    match &queued {
        Err(Error::OutcomeUnknown { operation_id, .. }) => assert_eq!(*operation_id, operation),
        other => panic!("expected OutcomeUnknown for a publish that waited past its bound, got {other:?}"),
    }
    if lock_waiters(&postgres, &application) == 1 && db.is_babelfish().await {
        // Babelfish 4.2 reads a TDS Attention only between requests
        // (tdsprotocol.c answers it with DONE_ATTN once the running request
        // has ended), so it cannot stop one waiting on a lock; SQL Server
        // stops it at once.
        support::skip(
            test,
            "Babelfish 4.2 acknowledges a TDS Attention only after the running request ends",
        );
        blocker.rollback().await;
        drop((observer, publisher, blocker));
        db.drop().await;
        return;
    }
    assert_eq!(
        lock_waiters(&postgres, &application),
        0,
        "the publish the client gave up on still waits for the row on the server"
    );

    blocker.commit().await.unwrap();
    assert_eq!(observer.outcome(operation).await.unwrap(), OperationOutcome::Unknown);
    assert_eq!(
        observer.read_publication(&key).await.unwrap(),
        Publication::NothingPublished
    );
    drop((observer, publisher, blocker));
    db.drop().await;
}
