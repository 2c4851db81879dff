//! Restore safety for every key (contract v1.3's Recover): a key the restored
//! database did not hold starts at or above the recovered floor, a Provision
//! that runs during a recovery waits for it, two runs of one recovery id on
//! an empty table answer `AlreadyRecovered`, and (on SQL Server) Recover's
//! table lock waits for a caller's transaction holding fence rows instead of
//! deadlocking with it, and a Provision of an existing key inside such a
//! transaction answers at once while a recovery waits.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::{Answer, Caller};
use support::lease::lease_cli;
use support::signal::until_waiting_for_a_lock;
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";
const RECOVER: &str = "EXEC fence_admin.Recover @RecoveryId = @P1";
const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

async fn provision(caller: &mut Caller, key: &str) {
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
}

async fn recover(caller: &mut Caller, id: Uuid) -> Answer {
    caller.call(RECOVER, &[&id]).await
}

/// Lets a spawned call reach the lock it is to wait for. The assertions do
/// not depend on it: a call that had not got there yet runs after the holder
/// commits, and must answer the same.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

#[tokio::test]
async fn a_key_the_backup_lacked_starts_above_every_generation_issued_before_the_restore() {
    let name = "a_key_the_backup_lacked_starts_above_every_generation_issued_before_the_restore";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    // The backup: taken before `late` existed.
    db.exec("SELECT * INTO dbo.SnapshotResource FROM fence.Resource;").await;
    let late = format!("late:{}", Uuid::new_v4().simple());
    provision(&mut caller, &late).await;
    let mut issued = 0;
    for _ in 0..7 {
        let acquired = caller.acquire(&late, Uuid::new_v4(), 1).await;
        issued = acquired.big("Generation").unwrap();
        db.exec(&format!("UPDATE fence.Resource SET LeaseUntilUtc = DATEADD(SECOND, -1, SYSUTCDATETIME()) WHERE ResourceKey = N'{late}';"))
            .await;
    }
    assert_eq!(issued, 7);
    // The restore: `late` is gone with everything it issued.
    db.exec("DELETE FROM fence.Tenure; DELETE FROM fence.Resource; INSERT INTO fence.Resource SELECT * FROM dbo.SnapshotResource;")
        .await;
    let recovered = recover(&mut caller, Uuid::new_v4()).await;
    assert_eq!(recovered.outcome(), "Recovered");
    let floor = recovered.big("GenerationFloor").unwrap();

    provision(&mut caller, &late).await;
    let again = caller.acquire(&late, Uuid::new_v4(), 30).await;
    let generation = again.big("Generation").unwrap();
    assert!(
        generation > issued && generation > floor,
        "a key provisioned after the recovery handed out generation {generation} again (issued {issued}, floor {floor})"
    );
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn a_provision_during_a_recovery_waits_for_it_and_starts_at_its_floor() {
    let name = "a_provision_during_a_recovery_waits_for_it_and_starts_at_its_floor";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    let mut operator = Caller::new(db.connect().await);
    let mut service = Caller::new(db.connect().await);
    provision(&mut operator, &format!("old:{}", Uuid::new_v4().simple())).await;
    // Each session compiles its procedure before the schedule.
    provision(&mut service, &format!("warm:{}", Uuid::new_v4().simple())).await;

    operator.begin("READ COMMITTED").await.unwrap();
    let recovered = recover(&mut operator, Uuid::new_v4()).await;
    assert_eq!(recovered.outcome(), "Recovered");
    let floor = recovered.big("GenerationFloor").unwrap();
    let key = format!("new:{}", Uuid::new_v4().simple());
    let created = tokio::spawn({
        let key = key.clone();
        async move {
            let answer = service.call(PROVISION, &[&key.as_str()]).await.outcome();
            (service, answer)
        }
    });
    settle().await;
    operator.commit().await.unwrap();
    let (mut service, answer) = created.await.unwrap();
    assert_eq!(answer, "Created");
    let acquired = service.acquire(&key, Uuid::new_v4(), 30).await;
    let generation = acquired.big("Generation").unwrap();
    assert!(
        generation > floor,
        "a key provisioned during the recovery starts below its floor: generation {generation}, floor {floor}"
    );
    drop((operator, service));
    db.drop().await;
}

#[tokio::test]
async fn two_runs_of_one_recovery_on_an_empty_table_answer_already_recovered() {
    let name = "two_runs_of_one_recovery_on_an_empty_table_answer_already_recovered";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    let (mut first, mut second) = (Caller::new(db.connect().await), Caller::new(db.connect().await));
    // Compiled before the race, each on a recovery of its own; then the
    // table is empty again.
    assert_eq!(recover(&mut first, Uuid::new_v4()).await.outcome(), "Recovered");
    assert_eq!(recover(&mut second, Uuid::new_v4()).await.outcome(), "Recovered");
    db.exec("DELETE FROM fence.Recovery;").await;

    let id = Uuid::new_v4();
    first.begin("READ COMMITTED").await.unwrap();
    assert_eq!(recover(&mut first, id).await.outcome(), "Recovered");
    let repeat = tokio::spawn(async move {
        let answer = recover(&mut second, id).await;
        (second, answer)
    });
    settle().await;
    first.commit().await.unwrap();
    let (second, answer) = repeat.await.unwrap();
    assert_eq!(
        answer.error_number(),
        None,
        "the repeated recovery failed instead of answering: {answer:?}"
    );
    assert_eq!(answer.outcome(), "AlreadyRecovered");
    let rows = db.query("SELECT COUNT(*) FROM fence.Recovery;").await;
    assert_eq!(rows[0].get::<i32, _>(0), Some(1));
    drop((first, second));
    db.drop().await;
}

#[tokio::test]
async fn recover_waits_for_a_caller_holding_fence_rows_instead_of_deadlocking() {
    let name = "recover_waits_for_a_caller_holding_fence_rows_instead_of_deadlocking";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    if db.is_babelfish().await {
        // Babelfish ignores table hints (babelfishpg_tsql.escape_hatch_table_hints
        // defaults to ignore), so Recover there locks row by row and a caller
        // that asks for a second row after Recover locked it can be chosen as
        // a deadlock victim. SQL Server's TABLOCKX, HOLDLOCK waits instead.
        support::skip(
            name,
            "Babelfish ignores the TABLOCKX, HOLDLOCK table hint Recover takes its table lock with",
        );
        db.drop().await;
        return;
    }
    let (mut service, mut operator) = (Caller::new(db.connect().await), Caller::new(db.connect().await));
    let mut leases = Vec::new();
    for name in ["k2", "k5"] {
        let key = format!("{name}:{}", Uuid::new_v4().simple());
        provision(&mut service, &key).await;
        let owner = Uuid::new_v4();
        let acquired = service.acquire(&key, owner, 600).await;
        leases.push((key, owner, acquired.big("Generation").unwrap()));
    }
    assert_eq!(recover(&mut operator, Uuid::new_v4()).await.outcome(), "Recovered");
    for (key, owner, generation) in &mut leases {
        let acquired = service.acquire(key, *owner, 600).await;
        *generation = acquired.big("Generation").unwrap();
    }

    service.begin("READ COMMITTED").await.unwrap();
    let (k5, o5, g5) = leases[1].clone();
    let held = service.call(ASSERT, &[&k5.as_str(), &o5, &g5]).await;
    assert_eq!(held.outcome(), "Holding");
    let recovery = tokio::spawn(async move {
        let answer = recover(&mut operator, Uuid::new_v4()).await;
        (operator, answer)
    });
    settle().await;
    let (k2, o2, g2) = leases[0].clone();
    let second = service.call(ASSERT, &[&k2.as_str(), &o2, &g2]).await;
    assert_eq!(
        second.error_number(),
        None,
        "the caller's second fence row failed behind Recover: {second:?}"
    );
    service.commit().await.unwrap();
    let (operator, answer) = recovery.await.unwrap();
    assert_eq!(answer.outcome(), "Recovered", "{answer:?}");
    drop((service, operator));
    db.drop().await;
}

#[tokio::test]
async fn a_provision_of_an_existing_key_inside_a_caller_transaction_answers_while_a_recovery_waits_for_it() {
    let name = "a_provision_of_an_existing_key_inside_a_caller_transaction_answers_while_a_recovery_waits_for_it";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    let (mut service, mut operator) = (Caller::new(db.connect().await), Caller::new(db.connect().await));
    let (held, existing) = (
        format!("held:{}", Uuid::new_v4().simple()),
        format!("existing:{}", Uuid::new_v4().simple()),
    );
    provision(&mut service, &held).await;
    provision(&mut service, &existing).await;
    let owner = Uuid::new_v4();
    let generation = service.acquire(&held, owner, 600).await.big("Generation").unwrap();

    // The service's transaction holds a fence row; the recovery takes the
    // recovery lock and waits for that row.
    service.begin("READ COMMITTED").await.unwrap();
    let asserted = service.call(ASSERT, &[&held.as_str(), &owner, &generation]).await;
    assert_eq!(asserted.outcome(), "Holding");
    let recovering = operator.spid().await;
    let recovery = tokio::spawn(async move {
        let answer = recover(&mut operator, Uuid::new_v4()).await;
        (operator, answer)
    });
    until_waiting_for_a_lock(&db, recovering, Duration::from_secs(20)).await;

    // An "ensure it exists" call inside the same transaction: the key
    // exists, so nothing waits for the recovery, which waits for this.
    let ensured = tokio::time::timeout(Duration::from_secs(10), service.call(PROVISION, &[&existing.as_str()]))
        .await
        .expect("Provision of an existing key waited behind the recovery it holds up");
    assert_eq!(ensured.outcome(), "Exists", "{ensured:?}");
    service.commit().await.unwrap();
    let (operator, answer) = recovery.await.unwrap();
    assert_eq!(answer.outcome(), "Recovered", "{answer:?}");
    drop((service, operator));
    db.drop().await;
}

/// A recovery behind a transaction that stays open gives up after its bound
/// (5 s) instead of waiting as long as the transaction does, and meanwhile a
/// renewal on another key, which the recovery's wait would hold up, is
/// answered within that bound. Run as it should be once the holder is gone,
/// the recovery succeeds.
#[tokio::test]
async fn a_recovery_behind_an_open_fence_transaction_gives_up_within_its_bound_and_other_keys_are_served() {
    let name = "a_recovery_behind_an_open_fence_transaction_gives_up_within_its_bound_and_other_keys_are_served";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    let (mut service, mut holder, mut operator) = (
        Caller::new(db.connect().await),
        Caller::new(db.connect().await),
        Caller::new(db.connect().await),
    );
    // The other key first: a recovery that locks row by row (Babelfish)
    // reaches it before the held one.
    let (other, held) = (
        format!("other:{}", Uuid::new_v4().simple()),
        format!("held:{}", Uuid::new_v4().simple()),
    );
    let mut leases = Vec::new();
    for key in [&other, &held] {
        provision(&mut service, key).await;
        let owner = Uuid::new_v4();
        leases.push((owner, service.acquire(key, owner, 600).await.big("Generation").unwrap()));
    }
    holder.begin("READ COMMITTED").await.unwrap();
    let asserted = holder.call(ASSERT, &[&held.as_str(), &leases[1].0, &leases[1].1]).await;
    assert_eq!(asserted.outcome(), "Holding");

    let recovering = operator.spid().await;
    let started = std::time::Instant::now();
    let recovery = tokio::spawn(async move {
        let answer = recover(&mut operator, Uuid::new_v4()).await;
        (operator, answer, started.elapsed())
    });
    until_waiting_for_a_lock(&db, recovering, Duration::from_secs(20)).await;
    let renewed = tokio::time::timeout(
        Duration::from_secs(8),
        service.renew(&other, leases[0].0, leases[0].1, 600),
    )
    .await
    .expect("a renewal on another key waited past the recovery's bound");
    assert_eq!(renewed.outcome(), "Renewed", "{renewed:?}");

    let (mut operator, answer, took) = tokio::time::timeout(Duration::from_secs(20), recovery)
        .await
        .expect("the recovery waited past its bound")
        .unwrap();
    let babelfish = db.is_babelfish().await;
    let gave_up = match &answer {
        Answer::Error { number: 50129, .. } => true,
        // Babelfish's lock time-out, which no procedure can catch.
        Answer::Error { message, .. } => babelfish && message.contains("lock timeout"),
        Answer::Row(_) => false,
    };
    assert!(gave_up, "the recovery did not give up waiting: {answer:?}");
    assert!(took < Duration::from_secs(15), "the recovery gave up after {took:?}");
    assert_eq!(operator.trancount().await, 0, "the recovery left a transaction open");

    // The command names the session that holds it up and says what to do.
    let holding = holder.spid().await;
    let output = lease_cli(&["recover"], &db.ado()).await;
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(said.contains(&format!("session {holding} holds a fence row")), "{said}");
    assert!(said.contains("run the same recovery again"), "{said}");

    holder.commit().await.unwrap();
    assert_eq!(recover(&mut operator, Uuid::new_v4()).await.outcome(), "Recovered");
    drop((service, holder, operator));
    db.drop().await;
}
