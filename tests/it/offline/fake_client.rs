//! `Client::fake()`: the client's own calls, guard, `run_fenced`, `settle`,
//! fenced transactions and operator calls on the model, on tokio's paused
//! clock, with scripted faults.

use std::time::Duration;

use fencepost::CancellationToken;
use fencepost::Client;
use fencepost::client::admin::{ForceRelease, LeaseQuery};
use fencepost::client::fake::{Fault, WriteEnd};
use fencepost::client::{Acquire, BeginFenced, Error, Fenced, Lease, LostReason, Procedure, Publish, RefusalReason};
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);

async fn acquired(client: &Client, key: &str) -> Lease {
    match client.acquire(key, LEASE).await.unwrap() {
        Acquire::Acquired(lease) => lease,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

async fn provisioned(key: &str) -> Client {
    let client = Client::fake();
    client.provision(key).await.unwrap();
    client
}

#[tokio::test(start_paused = true)]
async fn a_late_holder_is_superseded_after_its_lease_ran_out_and_another_took_over() {
    let first = provisioned("report").await;
    let second = first.as_fake().unwrap().client();
    let lease = acquired(&first, "report").await;
    match second.acquire("report", LEASE).await.unwrap() {
        Acquire::Busy { remaining, .. } => assert_eq!(remaining, LEASE),
        other => panic!("expected Busy, got {other:?}"),
    }
    tokio::time::advance(LEASE).await;
    let successor = acquired(&second, "report").await;
    assert_eq!(successor.generation(), lease.generation() + 1);
    assert_eq!(
        first.publish(&lease, Uuid::new_v4(), "late").await.unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );
    assert_eq!(
        second.publish(&successor, Uuid::new_v4(), "on time").await.unwrap(),
        Publish::Published
    );
    let fence = first.as_fake().unwrap().fence();
    assert_eq!(fence.resource("report").unwrap().payload.as_deref(), Some("on time"));
}

#[tokio::test(start_paused = true)]
async fn a_reply_lost_after_the_commit_is_unknown_and_its_replay_already_published() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    let lease = acquired(&client, "report").await;
    fake.fail_next(Procedure::Publish, Fault::ReplyLost);
    let id = Uuid::new_v4();
    match client.publish(&lease, id, "r").await {
        Err(Error::OutcomeUnknown { operation_id, .. }) => assert_eq!(operation_id, id),
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert!(fake.fence().publish_record(id).is_some(), "it committed");
    assert_eq!(
        client.publish(&lease, id, "r").await.unwrap(),
        Publish::AlreadyPublished
    );
    assert_eq!(fake.calls(Procedure::Publish), 2);
}

#[tokio::test(start_paused = true)]
async fn a_request_lost_before_the_fence_changes_nothing_and_its_replay_publishes() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    let lease = acquired(&client, "report").await;
    fake.fail_next(Procedure::Publish, Fault::RequestLost);
    let id = Uuid::new_v4();
    assert!(matches!(
        client.publish(&lease, id, "r").await,
        Err(Error::OutcomeUnknown { .. })
    ));
    assert!(fake.fence().publish_record(id).is_none(), "nothing reached the fence");
    assert_eq!(client.publish(&lease, id, "r").await.unwrap(), Publish::Published);
}

#[tokio::test(start_paused = true)]
async fn a_server_error_by_number_reads_as_the_server_would_send_it() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    fake.fail_next(Procedure::Inspect, Fault::ServerError(50101));
    match client.inspect("report").await {
        Err(Error::Rejected { number, .. }) => assert_eq!(number, 50101),
        other => panic!("expected the refusal, got {other:?}"),
    }
    // The lock wait an Acquire gave up is contention, never an error.
    fake.fail_next(Procedure::Acquire, Fault::ServerError(1222));
    match client.acquire("report", LEASE).await.unwrap() {
        Acquire::Busy { remaining, .. } => assert_eq!(remaining, Duration::ZERO),
        other => panic!("expected Busy, got {other:?}"),
    }
    fake.fail_next(Procedure::Inspect, Fault::Fatal);
    match client.inspect("report").await {
        Err(Error::Server { number, class, .. }) => assert_eq!((number, class), (596, 21)),
        other => panic!("expected the fatal error, got {other:?}"),
    }
    // A delay past the call timeout is the client's time-out; within it, an answer.
    fake.fail_next(Procedure::Inspect, Fault::Delay(Duration::from_secs(3600)));
    assert!(matches!(
        client.inspect("report").await,
        Err(Error::Network { timed_out: true, .. })
    ));
    fake.fail_next(Procedure::Inspect, Fault::Delay(Duration::from_secs(1)));
    let before = tokio::time::Instant::now();
    assert!(client.inspect("report").await.is_ok());
    assert_eq!(before.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_lost_acquire_reply_is_confirmed_as_the_same_owner() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    fake.fail_next(Procedure::Acquire, Fault::ReplyLost);
    let sent = fake.now();
    let lease = acquired(&client, "report").await;
    assert_eq!(fake.calls(Procedure::Acquire), 2);
    // The retry, a moment later, found the first attempt's grant and kept it.
    assert!(fake.now() > sent);
    assert_eq!(lease.generation(), 1);
    let row = fake.fence().resource("report").unwrap().clone();
    assert_eq!((row.owner, row.acquired_at), (Some(lease.owner()), Some(sent)));
}

async fn work(stop: CancellationToken) -> Result<String, std::io::Error> {
    // Four lease lengths: only renewals keep the lease.
    tokio::select! {
        () = tokio::time::sleep(LEASE * 4) => Ok("built".to_string()),
        () = stop.cancelled() => Err(std::io::Error::other("stopped")),
    }
}

#[tokio::test(start_paused = true)]
async fn run_fenced_renews_through_a_long_work_and_publishes_under_its_lease() {
    let client = provisioned("report").await;
    match client.run_fenced("report", LEASE, work).await.unwrap() {
        Fenced::Published { generation, .. } => assert_eq!(generation, 1),
        other => panic!("expected Published, got {other:?}"),
    }
    let fake = client.as_fake().unwrap();
    assert!(fake.calls(Procedure::Renew) >= 4, "{}", fake.calls(Procedure::Renew));
    let row = fake.fence().resource("report").unwrap().clone();
    assert_eq!((row.published_generation, row.owner), (Some(1), None));
}

#[tokio::test(start_paused = true)]
async fn run_fenced_stops_the_work_when_no_renewal_gets_through() {
    let client = provisioned("report").await;
    client
        .as_fake()
        .unwrap()
        .fail_every(Procedure::Renew, Fault::RequestLost);
    match client.run_fenced("report", LEASE, work).await.unwrap() {
        Fenced::Lost(LostReason::Unconfirmed { .. }) => {}
        other => panic!("expected Lost, got {other:?}"),
    }
    assert_eq!(
        client
            .as_fake()
            .unwrap()
            .fence()
            .resource("report")
            .unwrap()
            .published_generation,
        None
    );
}

#[tokio::test(start_paused = true)]
async fn the_guard_says_lost_when_an_operator_fences_the_holder_out() {
    let client = provisioned("report").await;
    let guard = client.guard(acquired(&client, "report").await);
    assert_eq!(
        client.admin().force_release("report").await.unwrap(),
        ForceRelease::Fenced { generation: 2 }
    );
    assert_eq!(guard.lost().await, LostReason::Renewal);
    assert!(guard.token().is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn an_unknown_run_is_settled_as_already_published() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    // The first publish commits and its reply is lost; every replay is lost
    // on the way there, until the lease ends.
    fake.fail_next(Procedure::Publish, Fault::ReplyLost);
    fake.fail_every(Procedure::Publish, Fault::RequestLost);
    let unsettled = match client
        .run_fenced("report", LEASE, |_| async { Ok::<_, std::io::Error>("r".to_string()) })
        .await
        .unwrap()
    {
        Fenced::Unknown(unsettled) => unsettled,
        other => panic!("expected Unknown, got {other:?}"),
    };
    fake.clear_faults();
    assert_eq!(client.settle(&unsettled).await.unwrap(), Publish::AlreadyPublished);
}

#[tokio::test(start_paused = true)]
async fn a_fenced_transaction_records_its_statements_and_commits_only_while_the_lease_holds() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    let lease = acquired(&client, "report").await;
    let BeginFenced::Holding(mut tx) = client.begin_fenced_without_guard(&lease).await.unwrap() else {
        panic!("the lease is held");
    };
    let day = 7i32;
    tx.execute("INSERT INTO dbo.Report (Day) VALUES (@P1)", &[&day])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let BeginFenced::Holding(mut late) = client.begin_fenced_without_guard(&lease).await.unwrap() else {
        panic!("the lease is held");
    };
    late.execute("DELETE FROM dbo.Report", &[]).await.unwrap();
    // A successor takes over while the transaction is open: the fake has no
    // row lock to make it wait, and the commit's assert refuses.
    fake.call(&fencepost::model::Call::force_release("report")).unwrap();
    assert!(matches!(
        late.commit().await,
        Err(Error::CommitRefused {
            reason: RefusalReason::Superseded
        })
    ));
    let writes = fake.fenced_writes();
    assert_eq!(writes.len(), 2);
    assert_eq!(writes[0].end, WriteEnd::Committed);
    assert_eq!(writes[0].statements[0].sql, "INSERT INTO dbo.Report (Day) VALUES (@P1)");
    assert_eq!(writes[0].statements[0].params, ["I32(Some(7))"]);
    assert_eq!(writes[1].end, WriteEnd::RolledBack);
}

#[tokio::test(start_paused = true)]
async fn a_rolled_back_fenced_transaction_leaves_the_source_version_as_it_was() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    let lease = acquired(&client, "report").await;
    let BeginFenced::Holding(tx) = client.begin_fenced_versioned_without_guard(&lease, 5).await.unwrap() else {
        panic!("the lease is held");
    };
    assert_eq!(fake.fence().resource("report").unwrap().source_version, Some(5));
    drop(tx);
    assert_eq!(fake.fence().resource("report").unwrap().source_version, None);
    assert_eq!(fake.fenced_writes()[0].end, WriteEnd::RolledBack);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_acquire_takes_the_lease_once_the_holder_lets_go() {
    let first = provisioned("report").await;
    let second = first.as_fake().unwrap().client();
    let guard = first.guard(acquired(&first, "report").await);
    let waiting = tokio::spawn(async move { second.acquire_waiting("report", LEASE, Duration::from_secs(600)).await });
    tokio::time::sleep(Duration::from_secs(90)).await;
    assert!(!waiting.is_finished(), "the guard renews, so the waiter waits");
    assert_eq!(guard.release().await.unwrap(), fencepost::client::Release::Released);
    match waiting.await.unwrap().unwrap() {
        Acquire::Acquired(lease) => assert_eq!(lease.generation(), 2),
        other => panic!("expected Acquired, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_operator_calls_list_and_history_work_on_the_fake() {
    let client = provisioned("b").await;
    client.provision("a").await.unwrap();
    let lease = acquired(&client, "b").await;
    let _ = client.release(&lease).await.unwrap();
    let admin = client.admin();
    admin.verify_contract().await.unwrap();
    client.verify_contract().await.unwrap();
    let page = admin.list_leases(&LeaseQuery::new()).await.unwrap();
    let keys: Vec<_> = page.leases.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    let history = admin.lease_history("b", 10).await.unwrap();
    assert!(format!("{history:?}").contains("Released"), "{history:?}");
    assert!(matches!(
        admin.force_release("nowhere").await.unwrap(),
        ForceRelease::NotProvisioned
    ));
}

#[tokio::test(start_paused = true)]
async fn the_operators_commands_answer_on_the_fake_as_the_procedures_row_them() {
    use fencepost::client::admin::{Prune, PruneOutcomes, Recover, Recovery, ResetSourceVersion, Retire};
    let client = provisioned("report").await;
    let admin = client.admin();
    let lease = acquired(&client, "report").await;
    let id = Uuid::new_v4();
    let first = admin.reset_source_version_as("report", Some(4), id).await.unwrap();
    assert_eq!(first, ResetSourceVersion::Reset { previous: None });
    // A replay answers the record, not the key's state.
    assert_eq!(
        admin.reset_source_version_as("report", Some(4), id).await.unwrap(),
        first
    );
    assert!(matches!(
        admin.retire("report").await,
        Err(Error::Server { number: 50131, .. })
    ));
    assert_eq!(
        client.release(&lease).await.unwrap(),
        fencepost::client::Release::Released
    );
    assert_eq!(
        admin.retire("report").await.unwrap(),
        Retire::Retired {
            generation: lease.generation()
        }
    );
    client.provision("report").await.unwrap();
    let recovery = Recovery::new(Uuid::new_v4());
    let Recover::Recovered(record) = admin.recover(&recovery).await.unwrap() else {
        panic!("a first recovery");
    };
    assert_eq!(record.generation_floor, 1 << 40);
    assert!(matches!(
        admin.recover(&recovery).await.unwrap(),
        Recover::AlreadyRecovered(again) if again == record
    ));
    assert!(matches!(
        admin.prune_tenure(1).await.unwrap(),
        Prune::Pruned { deleted: 0, .. }
    ));
    assert!(matches!(
        admin.prune_outcomes(1).await.unwrap(),
        PruneOutcomes::Pruned {
            publishes: 0,
            commands: 0,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_server_error_at_a_fenced_begin_reads_as_the_real_begin_reads_it() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    let lease = acquired(&client, "report").await;
    let refused = |reason| BeginFenced::Refused(reason);
    for (number, expected) in [
        (50110, refused(RefusalReason::Superseded)),
        (50111, refused(RefusalReason::Expired)),
        (50114, refused(RefusalReason::StaleSource)),
        (50112, BeginFenced::NotProvisioned),
    ] {
        fake.fail_next(Procedure::AssertHolder, Fault::ServerError(number));
        let begun = client.begin_fenced_without_guard(&lease).await;
        assert_eq!(
            format!("{:?}", begun.unwrap()),
            format!("{expected:?}"),
            "error {number}"
        );
    }
    fake.fail_next(Procedure::AssertHolder, Fault::ServerError(1205));
    let deadlock = client.begin_fenced_without_guard(&lease).await.unwrap_err();
    assert_eq!(deadlock.server_number(), Some(1205));
    assert!(fake.fenced_writes().is_empty(), "no transaction began");
}

async fn commit_meeting(fault: Fault) -> (Result<(), Error>, fencepost::client::fake::Fake) {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap().clone();
    let lease = acquired(&client, "report").await;
    let BeginFenced::Holding(tx) = client.begin_fenced_versioned_without_guard(&lease, 5).await.unwrap() else {
        panic!("the lease is held");
    };
    fake.fail_next(Procedure::AssertHolder, fault);
    (tx.commit().await, fake)
}

#[tokio::test(start_paused = true)]
async fn a_server_error_before_the_commit_is_refused_or_aborted_and_rolls_back() {
    for (number, reason) in [
        (50110, RefusalReason::Superseded),
        (50111, RefusalReason::Expired),
        (50114, RefusalReason::StaleSource),
    ] {
        let (committed, fake) = commit_meeting(Fault::ServerError(number)).await;
        match committed {
            Err(Error::CommitRefused { reason: got }) => assert_eq!(got, reason, "error {number}"),
            other => panic!("error {number}: expected CommitRefused, got {other:?}"),
        }
        assert_eq!(fake.fenced_writes()[0].end, WriteEnd::RolledBack);
        assert_eq!(fake.fence().resource("report").unwrap().source_version, None);
    }
    let (committed, fake) = commit_meeting(Fault::ServerError(1205)).await;
    assert!(
        matches!(committed, Err(Error::TransactionAborted { .. })),
        "a deadlock before the COMMIT rolls back: {committed:?}"
    );
    assert_eq!(fake.fenced_writes()[0].end, WriteEnd::RolledBack);
}

#[tokio::test(start_paused = true)]
async fn only_a_commit_whose_answer_is_lost_is_unknown() {
    for fault in [Fault::ReplyLost, Fault::RequestLost, Fault::Fatal] {
        let (committed, _) = commit_meeting(fault).await;
        assert!(
            matches!(committed, Err(Error::CommitUnknown { .. })),
            "{fault:?}: {committed:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_commit_asserts_the_source_version_the_begin_asserted() {
    let client = provisioned("report").await;
    let fake = client.as_fake().unwrap();
    let lease = acquired(&client, "report").await;
    let BeginFenced::Holding(tx) = client.begin_fenced_versioned_without_guard(&lease, 5).await.unwrap() else {
        panic!("the lease is held");
    };
    // A newer source committed meanwhile (the fake has no row lock to make
    // the reset wait): the commit's assert refuses the older one.
    fake.call(&fencepost::model::Call::ResetSourceVersion {
        resource_key: Some("report".to_string()),
        source_version: Some(9),
        operation_id: None,
    })
    .unwrap();
    assert!(matches!(
        tx.commit().await,
        Err(Error::CommitRefused {
            reason: RefusalReason::StaleSource
        })
    ));
    // The refused transaction rolled back, and the reset made meanwhile stands.
    let row = fake.fence().resource("report").unwrap().clone();
    assert_eq!(row.source_version, Some(9));
}

#[tokio::test(start_paused = true)]
async fn renew_many_renews_each_lease_still_held_and_loses_each_taken_over_or_run_out() {
    use fencepost::client::Renew;
    let client = provisioned("a").await;
    client.provision("b").await.unwrap();
    client.provision("c").await.unwrap();
    let other = client.as_fake().unwrap().client();
    let ran_out = acquired(&client, "c").await;
    let taken = acquired(&client, "b").await;
    tokio::time::advance(LEASE).await;
    acquired(&other, "b").await;
    let held = acquired(&client, "a").await;
    tokio::time::advance(LEASE / 2).await;
    let mut leases = [taken, held.clone(), ran_out];
    let answers = client.renew_many(&mut leases).await.unwrap();
    assert_eq!(answers[0], Renew::Lost);
    assert_eq!(answers[2], Renew::Lost);
    let Renew::Renewed { until } = answers[1] else {
        panic!("expected the held lease renewed, got {answers:?}");
    };
    let row = client.as_fake().unwrap().fence().resource("a").unwrap().clone();
    assert_eq!(row.lease_until, Some(until));
    assert!(until > held.until(), "renewed past its old end");
}
