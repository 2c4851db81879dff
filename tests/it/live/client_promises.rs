//! What the README's client section promises, end to end on a live engine:
//! `run_fenced` answering `Busy`, `NotProvisioned` and `Failed`;
//! `acquire_waiting` answering `Busy` at its deadline and `NotProvisioned` at
//! once; a fenced transaction answering `Refused(Expired)` and
//! `NotProvisioned`; a refusal inside the caller's transaction rolling back
//! what it wrote before the call; the outcomes of calls on a key that was
//! never provisioned; the reader's and the operator's roles; and a guard's
//! token cancelled by `release()`. The tests share one database, each with
//! keys of its own, except the two role tests: on Babelfish they run the
//! SECURITY DEFINER script, which changes every procedure.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencepost::Client;
use fencepost::client::{
    Acquire, Fenced, FencedOutcome, Inspection, Publication, Publish, RefusalReason, Release, Renew,
};
use support::TestDatabase;
use support::caller::{Caller, RELEASE};
use support::lease::{acquired, json, lease_cli, provisioned, wait_until_expired};
use tokio::time::Instant;
use uuid::Uuid;

/// A client as the deploy login: these tests are about outcomes, not the
/// start-up check.
async fn client(db: &TestDatabase) -> Client {
    Client::connect(&db.ado()).await.expect("connect")
}

/// A key nobody provisioned.
fn unprovisioned(name: &str) -> String {
    format!("{name}:never:{}", Uuid::new_v4().simple())
}

/// On Babelfish the procedures reach the tables for a role's login only
/// once the PostgreSQL-side script makes them SECURITY DEFINER (no ownership
/// chaining). `false` after printing the skip when that cannot be done.
async fn roles_can_reach_the_tables(db: &TestDatabase, test: &str) -> bool {
    if !db.is_babelfish().await {
        return true;
    }
    let Ok(postgres) = std::env::var(support::babelfish_postgres::POSTGRES_ENV) else {
        support::skip(
            test,
            "Babelfish needs FENCEPOST_TEST_POSTGRES to make the procedures SECURITY DEFINER",
        );
        return false;
    };
    support::babelfish_postgres::run_security_definer_script(&postgres, &db.name);
    true
}

#[tokio::test]
async fn run_fenced_answers_busy_and_not_provisioned_without_running_the_work() {
    let test = "run_fenced_answers_busy_and_not_provisioned_without_running_the_work";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let (holder, runner) = (client(&db).await, client(&db).await);
    let key = provisioned(&holder, "busy").await;
    let lease = acquired(holder.acquire(&key, Duration::from_secs(60)).await.unwrap());
    let ran = Arc::new(AtomicBool::new(false));
    let work = |ran: Arc<AtomicBool>| {
        move |_| async move {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, String>("result".to_string())
        }
    };

    let busy = runner
        .run_fenced(&key, Duration::from_secs(5), work(ran.clone()))
        .await
        .unwrap();
    match busy {
        Fenced::Busy { until } => assert_eq!(until, lease.until(), "not the holder's expiry"),
        other => panic!("expected Busy, got {other:?}"),
    }
    let missing = runner
        .run_fenced(&unprovisioned("run"), Duration::from_secs(5), work(ran.clone()))
        .await
        .unwrap();
    assert!(matches!(missing, Fenced::NotProvisioned), "{missing:?}");
    assert!(!ran.load(Ordering::SeqCst), "the work ran without the lease");
    assert_eq!(
        runner.read_publication(&key).await.unwrap(),
        Publication::NothingPublished
    );
    drop((holder, runner));
    db.drop().await;
}

#[tokio::test]
async fn run_fenced_whose_work_fails_publishes_nothing_and_releases_the_lease() {
    let test = "run_fenced_whose_work_fails_publishes_nothing_and_releases_the_lease";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let (runner, successor) = (client(&db).await, client(&db).await);
    let key = provisioned(&runner, "failing").await;
    let failed = runner
        .run_fenced(&key, Duration::from_secs(60), |_| async {
            Err::<String, _>("the rebuild broke")
        })
        .await
        .unwrap();
    assert!(matches!(failed, Fenced::Failed("the rebuild broke")), "{failed:?}");
    assert_eq!(
        runner.read_publication(&key).await.unwrap(),
        Publication::NothingPublished,
        "a failed work's result was published"
    );
    // Released, not left to run out its minute: free at once.
    let (generation, held, ..) = support::lease::state(&runner, &key).await;
    assert_eq!(generation, 1, "the run never held the lease");
    assert!(!held, "the failed run left its lease held");
    let next = acquired(successor.acquire(&key, Duration::from_secs(5)).await.unwrap());
    assert_eq!(next.generation(), 2);
    drop((runner, successor));
    db.drop().await;
}

#[tokio::test]
async fn acquire_waiting_answers_busy_at_its_deadline_after_one_last_attempt() {
    let test = "acquire_waiting_answers_busy_at_its_deadline_after_one_last_attempt";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let (holder, waiter) = (client(&db).await, support::lease::worker(&db.ado()).await);
    let key = provisioned(&holder, "waited").await;
    let lease = acquired(holder.acquire(&key, Duration::from_secs(60)).await.unwrap());
    let wait = Duration::from_millis(2500);
    let (sent, started) = (waiter.requests_sent(), Instant::now());
    // When each attempt started, as the client's own request counter shows.
    let (done, mut finished) = tokio::sync::watch::channel(false);
    let attempts = tokio::spawn({
        let waiter = waiter.clone();
        async move {
            let (mut seen, mut at) = (sent, Vec::new());
            while !*finished.borrow_and_update() {
                let now = waiter.requests_sent();
                if now > seen {
                    seen = now;
                    at.push(started.elapsed());
                }
                let _ = tokio::time::timeout(Duration::from_millis(5), finished.changed()).await;
            }
            // The last attempt may have been sent and answered within the
            // last 5 ms: it is counted once the answer is in.
            if waiter.requests_sent() > seen {
                at.push(started.elapsed());
            }
            at
        }
    });
    let answer = waiter
        .acquire_waiting(&key, Duration::from_secs(5), wait)
        .await
        .unwrap();
    let took = started.elapsed();
    done.send_replace(true);
    let attempts = attempts.await.unwrap();
    match answer {
        Acquire::Busy { until, .. } => assert_eq!(until, lease.until(), "not the holder's expiry"),
        other => panic!("expected Busy at the deadline, got {other:?}"),
    }
    assert!(took >= wait, "gave up after {took:?}, before the {wait:?} deadline");
    assert!(took < wait + Duration::from_secs(2), "answered {took:?} after starting");
    assert_eq!(
        attempts.len() as u64,
        waiter.requests_sent() - sent,
        "an attempt went unseen: {attempts:?}"
    );
    // Pauses of at most a second in between, and the last attempt at the
    // deadline, not before it.
    assert!(attempts.len() >= 3, "attempts at {attempts:?}");
    assert!(
        attempts.windows(2).all(|w| w[1] - w[0] < Duration::from_millis(1500)),
        "a pause longer than a second: {attempts:?}"
    );
    let last = *attempts.last().unwrap();
    assert!(
        last >= wait - Duration::from_millis(50),
        "the last attempt was at {last:?}, not at the {wait:?} deadline: {attempts:?}"
    );
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn acquire_waiting_answers_not_provisioned_at_once() {
    let test = "acquire_waiting_answers_not_provisioned_at_once";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let waiter = client(&db).await;
    let sent = waiter.requests_sent();
    let answer = waiter
        .acquire_waiting(&unprovisioned("wait"), Duration::from_secs(5), Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(answer, Acquire::NotProvisioned), "{answer:?}");
    assert_eq!(waiter.requests_sent() - sent, 1, "it asked again");
    drop(waiter);
    db.drop().await;
}

#[tokio::test]
async fn a_fenced_transaction_on_an_expired_lease_is_refused_as_expired_and_runs_nothing() {
    let test = "a_fenced_transaction_on_an_expired_lease_is_refused_as_expired_and_runs_nothing";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "expired").await;
    let lease = acquired(client.acquire(&key, Duration::from_secs(1)).await.unwrap());
    wait_until_expired(&client, &key).await;
    let mut ran = false;
    let answer = client
        .fenced_transaction_without_guard(&lease, async |_tx| {
            ran = true;
            Ok::<_, String>(())
        })
        .await
        .unwrap();
    assert!(
        matches!(answer, FencedOutcome::Refused(RefusalReason::Expired)),
        "{answer:?}"
    );
    assert!(!ran, "the work ran on an expired lease");
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_fenced_transaction_on_a_key_with_no_fence_row_is_not_provisioned_and_runs_nothing() {
    let test = "a_fenced_transaction_on_a_key_with_no_fence_row_is_not_provisioned_and_runs_nothing";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "restored-away").await;
    let lease = acquired(client.acquire(&key, Duration::from_secs(60)).await.unwrap());
    // As a restore from before the key was provisioned leaves it.
    db.exec(&format!(
        "DELETE FROM fence.Tenure WHERE ResourceKey = N'{key}'; DELETE FROM fence.Resource WHERE ResourceKey = N'{key}';"
    ))
    .await;
    let mut ran = false;
    let answer = client
        .fenced_transaction_without_guard(&lease, async |_tx| {
            ran = true;
            Ok::<_, String>(())
        })
        .await
        .unwrap();
    assert!(matches!(answer, FencedOutcome::NotProvisioned), "{answer:?}");
    assert!(!ran, "the work ran without a fence row");
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_refusal_inside_the_callers_transaction_rolls_back_what_it_wrote_before_the_call() {
    let test = "a_refusal_inside_the_callers_transaction_rolls_back_what_it_wrote_before_the_call";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // A table of this test's own: the database is shared.
    let written = format!("dbo.Written_{}", Uuid::new_v4().simple());
    db.exec(&format!("CREATE TABLE {written} (Step nvarchar(20) NOT NULL);"))
        .await;
    let mut caller = Caller::new(db.connect().await);
    let key = format!("refused:{}", Uuid::new_v4().simple());
    let provision = caller
        .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key.as_str()])
        .await;
    assert_eq!(provision.outcome(), "Created");
    let owner = Uuid::new_v4();
    let acquired = caller.acquire(&key, owner, 60).await;
    assert_eq!(acquired.outcome(), "Acquired");
    let generation = acquired.big("Generation").unwrap();

    for (step, number) in [("publish", 50105), ("acquire", 50103)] {
        caller.begin("READ COMMITTED").await.unwrap();
        caller
            .batch(&format!("INSERT INTO {written} (Step) VALUES (N'{step}');"))
            .await
            .unwrap();
        let refused = match step {
            // A nil operation id, and a lease length of zero seconds.
            "publish" => caller.publish(&key, owner, generation, Uuid::nil(), "x").await,
            _ => caller.acquire(&key, Uuid::new_v4(), 0).await,
        };
        assert_eq!(refused.error_number(), Some(number), "{step}: {refused:?}");
        assert_eq!(
            caller.trancount().await,
            0,
            "{step}: the caller's transaction is still open"
        );
        caller.commit().await.unwrap();
    }
    let rows = db.query(&format!("SELECT COUNT(*) FROM {written}")).await;
    assert_eq!(
        rows[0].get::<i32, _>(0),
        Some(0),
        "what the transaction wrote before the refused call committed"
    );
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn publish_renew_and_release_on_a_never_provisioned_key_answer_their_outcomes() {
    let test = "publish_renew_and_release_on_a_never_provisioned_key_answer_their_outcomes";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = unprovisioned("outcomes");
    let (owner, generation) = (Uuid::new_v4(), 1i64);
    let publish = caller.publish(&key, owner, generation, Uuid::new_v4(), "x").await;
    assert_eq!(publish.outcome(), "NotProvisioned");
    let renew = caller.renew(&key, owner, generation, 30).await;
    assert_eq!(renew.outcome(), "Lost");
    let release = caller.call(RELEASE, &[&key.as_str(), &owner, &generation]).await;
    assert_eq!(release.outcome(), "NotHolder");
    let rows = db
        .query(&format!(
            "SELECT (SELECT COUNT(*) FROM fence.Resource WHERE ResourceKey = N'{key}') \
                  + (SELECT COUNT(*) FROM fence.PublishedOperation WHERE ResourceKey = N'{key}')"
        ))
        .await;
    assert_eq!(rows[0].get::<i32, _>(0), Some(0), "a call made a row for the key");

    // The client's reading of those rows, for a lease whose key has lost its
    // fence row (as a restore from before its provisioning leaves it).
    let client = client(&db).await;
    let key = provisioned(&client, "outcomes").await;
    let mut lease = acquired(client.acquire(&key, Duration::from_secs(60)).await.unwrap());
    db.exec(&format!(
        "DELETE FROM fence.Tenure WHERE ResourceKey = N'{key}'; DELETE FROM fence.Resource WHERE ResourceKey = N'{key}';"
    ))
    .await;
    assert_eq!(
        client.publish(&lease, Uuid::new_v4(), "x").await.unwrap(),
        Publish::Refused(RefusalReason::NotProvisioned)
    );
    assert_eq!(client.renew(&mut lease).await.unwrap(), Renew::Lost);
    assert_eq!(client.release(&lease).await.unwrap(), Release::NotHolder);
    drop((caller, client));
    db.drop().await;
}

#[tokio::test]
async fn a_reader_login_inspects_and_reads_publications() {
    let test = "a_reader_login_inspects_and_reads_publications";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = client(&db).await;
    let key = provisioned(&service, "read").await;
    let lease = acquired(service.acquire(&key, Duration::from_secs(60)).await.unwrap());
    assert_eq!(
        service.publish(&lease, Uuid::new_v4(), "the report").await.unwrap(),
        Publish::Published
    );
    let reader_ado = db.login_in_role(Some("fence_reader")).await;
    if !roles_can_reach_the_tables(&db, test).await {
        drop(service);
        db.drop().await;
        return;
    }
    let reader = Client::connect(&reader_ado).await.unwrap();
    match reader.inspect(&key).await.unwrap() {
        Inspection::Found(state) => {
            assert_eq!(state.generation, lease.generation());
            assert!(state.is_held);
            assert_eq!(state.published_generation, Some(lease.generation()));
        }
        other => panic!("{other:?}"),
    }
    match reader.read_publication(&key).await.unwrap() {
        Publication::Found {
            generation, payload, ..
        } => assert_eq!((generation, payload.as_str()), (lease.generation(), "the report")),
        other => panic!("{other:?}"),
    }
    drop((service, reader));
    db.drop().await;
}

#[tokio::test]
async fn an_operator_login_lists_and_force_releases_leases_by_procedure_and_command() {
    let test = "an_operator_login_lists_and_force_releases_leases_by_procedure_and_command";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = client(&db).await;
    let prefix = format!("ops-{}:", Uuid::new_v4().simple());
    let first = provisioned(&service, &format!("{prefix}first")).await;
    let second = provisioned(&service, &format!("{prefix}second")).await;
    let held_first = acquired(service.acquire(&first, Duration::from_secs(600)).await.unwrap());
    let held_second = acquired(service.acquire(&second, Duration::from_secs(600)).await.unwrap());
    let operator_ado = db.login_in_role(Some("fence_operator")).await;
    if !roles_can_reach_the_tables(&db, test).await {
        drop(service);
        db.drop().await;
        return;
    }

    // The procedures, as the operator's own login.
    let mut operator = Caller::new(support::connect_ado(&operator_ado).await);
    let listed = operator
        .conn
        .query("EXEC fence_admin.ListLeases @Prefix = @P1", &[&prefix.as_str()])
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let keys: Vec<&str> = listed
        .iter()
        .map(|r| r.get::<&str, _>("ResourceKey").unwrap())
        .collect();
    assert_eq!(keys, [first.as_str(), second.as_str()]);
    let fenced = operator
        .call("EXEC fence_admin.ForceRelease @ResourceKey = @P1", &[&first.as_str()])
        .await;
    assert_eq!(fenced.outcome(), "Fenced");
    assert_eq!(fenced.big("Generation"), Some(held_first.generation() + 1));

    // The commands, as the same login.
    let output = lease_cli(
        &["list", "--prefix", &prefix, "--held", "--format", "json"],
        &operator_ado,
    )
    .await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document = json(&output);
    let held: Vec<&str> = document["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    assert_eq!(held, [second.as_str()], "{document}");
    let output = lease_cli(&["force-release", &second, "--format", "json"], &operator_ado).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document = json(&output);
    assert_eq!(document["outcome"], "Fenced", "{document}");
    assert_eq!(document["generation"], held_second.generation() + 1);
    // Its operation id, recorded through the procedure the role may run
    // (fence.OperatorOperation is granted to nobody), answers a rerun.
    let operation_id = document["operation_id"].as_str().unwrap().to_string();
    let rerun = lease_cli(
        &[
            "force-release",
            &second,
            "--operation-id",
            &operation_id,
            "--format",
            "json",
        ],
        &operator_ado,
    )
    .await;
    assert_eq!(
        json(&rerun)["generation"],
        held_second.generation() + 1,
        "{}",
        String::from_utf8_lossy(&rerun.stderr)
    );

    for lease in [&held_first, &held_second] {
        assert_eq!(
            service.publish(lease, Uuid::new_v4(), "late").await.unwrap(),
            Publish::Refused(RefusalReason::Superseded),
            "{} was not fenced",
            lease.key()
        );
    }
    drop((service, operator));
    db.drop().await;
}

#[tokio::test]
async fn releasing_a_guard_cancels_its_token() {
    let test = "releasing_a_guard_cancels_its_token";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let client = client(&db).await;
    let key = provisioned(&client, "guarded").await;
    let guard = client.guard(acquired(client.acquire(&key, Duration::from_secs(60)).await.unwrap()));
    let token = guard.token();
    assert!(!token.is_cancelled(), "cancelled while the lease is held");
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    assert!(token.is_cancelled(), "release() left the work's token live");
    let (_, held, ..) = support::lease::state(&client, &key).await;
    assert!(!held);
    drop(client);
    db.drop().await;
}
