//! `fencepost lease recover` on a live engine, after a restore simulated by
//! copying the fence tables back from a snapshot taken earlier: every later
//! acquisition gets a generation above every one issued before the restore,
//! open leases are voided, and repeating the recovery changes nothing.

use crate::support;

use std::time::Duration;

use fencepost::audit::{Policy, Rule, RuleOutcome, evaluate, read_catalog};
use fencepost::client::{Publish, Release, Renew};
use fencepost::deploy::identity;
use support::TestDatabase;
use support::lease::{acquired, json, lease_cli, provisioned, state, unwarmed};
use uuid::Uuid;

/// How `check`'s FP019 (the database was restored or failed over) comes out
/// on `db`, read as `fencepost check` reads it.
async fn identity_rule(db: &TestDatabase) -> RuleOutcome {
    let catalog = read_catalog(&mut db.connect().await).await.expect("read the catalog");
    evaluate(&catalog, &Policy::default()).outcome(Rule::DatabaseIdentity)
}

const LONG: Duration = Duration::from_secs(600);
/// Generations per epoch: what a recovery raises to a multiple of.
const EPOCH: i64 = 1 << 40;

/// The tables a restore brings back, in the order they can be refilled.
const TABLES: [&str; 4] = ["Resource", "PublishedOperation", "Tenure", "Recovery"];

async fn take_snapshot(db: &TestDatabase) {
    for table in TABLES {
        db.exec(&format!("SELECT * INTO dbo.Snapshot{table} FROM fence.{table};"))
            .await;
    }
}

/// Puts every fence table back as the snapshot held it, as a restore from a
/// backup taken at the snapshot would.
async fn restore_snapshot(db: &TestDatabase) {
    for table in TABLES {
        db.exec(&format!(
            "DELETE FROM fence.{table}; INSERT INTO fence.{table} SELECT * FROM dbo.Snapshot{table};"
        ))
        .await;
    }
}

#[tokio::test]
async fn after_a_restore_every_acquisition_gets_a_generation_above_all_issued_before() {
    let Some(db) =
        TestDatabase::deployed("after_a_restore_every_acquisition_gets_a_generation_above_all_issued_before").await
    else {
        return;
    };
    let client = unwarmed(&db.ado()).await;
    let ado = db.ado();
    let busy = provisioned(&client, "recover").await;
    let held = provisioned(&client, "recover").await;
    for _ in 0..3 {
        let lease = acquired(client.acquire(&busy, LONG).await.unwrap());
        assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    }
    // A holder whose lease the backup captured.
    let stale = acquired(client.acquire(&held, LONG).await.unwrap());
    take_snapshot(&db).await;

    // Generations issued after the backup, then lost with the restore.
    let mut issued = vec![stale.generation()];
    for _ in 0..2 {
        let lease = acquired(client.acquire(&busy, LONG).await.unwrap());
        issued.push(lease.generation());
        assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    }
    let highest_issued = *issued.iter().max().unwrap();
    restore_snapshot(&db).await;
    let (restored, ..) = state(&client, &busy).await;
    assert!(
        restored < highest_issued,
        "the restore did not take the generation back"
    );

    let id = Uuid::new_v4().to_string();
    let output = lease_cli(&["recover", "--id", &id, "--format", "json"], &ado).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let recovered = json(&output);
    assert_eq!(recovered["outcome"], "Recovered", "{recovered}");
    assert_eq!(recovered["leases_voided"], 1, "{recovered}");
    let floor = recovered["generation_floor"].as_i64().unwrap();
    assert_eq!(floor % EPOCH, 0, "{recovered}");
    assert!(floor > highest_issued, "{recovered}");

    // The holder the backup brought back is fenced out.
    let mut stale_again = stale.clone();
    assert_eq!(
        client.publish(&stale, Uuid::new_v4(), "stale").await.unwrap(),
        Publish::Refused(fencepost::client::RefusalReason::Superseded)
    );
    assert!(matches!(client.renew(&mut stale_again).await.unwrap(), Renew::Lost));

    let mut after = Vec::new();
    for key in [&busy, &held] {
        let lease = acquired(client.acquire(key, LONG).await.unwrap());
        assert!(lease.generation() > highest_issued, "{key}: {}", lease.generation());
        after.push(lease);
    }

    // Repeating the same recovery changes nothing.
    let repeated = json(&lease_cli(&["recover", "--id", &id, "--format", "json"], &ado).await);
    assert_eq!(repeated["outcome"], "AlreadyRecovered", "{repeated}");
    assert_eq!(repeated["generation_floor"], floor, "{repeated}");
    for lease in &after {
        let (generation, held_now, ..) = state(&client, lease.key()).await;
        assert_eq!(
            generation,
            lease.generation(),
            "a repeated recovery moved {}",
            lease.key()
        );
        assert!(held_now, "a repeated recovery voided {}", lease.key());
    }

    // In text, the repetition says it changed nothing and how to recover
    // from another restore.
    let text = lease_cli(&["recover", "--id", &id], &ado).await;
    assert_eq!(text.status.code(), Some(0), "{}", support::binary::stderr(&text));
    let line = support::binary::stdout(&text);
    assert!(
        line.starts_with(&format!("recovery {id} (from --id) already ran at ")),
        "{line}"
    );
    assert!(
        line.trim_end().ends_with(&format!(
            "every generation was raised to {floor}; nothing changed. \
             To recover from another restore or failover since then, pass a new --id"
        )),
        "{line}"
    );

    // A floor from the operator: every later generation is above it too.
    // Without --id, the recovery is keyed by the database's recovery fork
    // where the engine shows one, so a second run for the same restore
    // changes nothing; elsewhere by a fresh id.
    let fork = identity::read_current(&mut *db.session().await).await.unwrap();
    let known_downstream = 5 * EPOCH + 7;
    let floored = json(
        &lease_cli(
            &["recover", "--floor", &known_downstream.to_string(), "--format", "json"],
            &ado,
        )
        .await,
    );
    assert_eq!(floored["outcome"], "Recovered", "{floored}");
    assert_eq!(floored["leases_voided"], 2, "{floored}");
    match fork {
        Some(fork) => {
            assert_eq!(floored["recovery_id_from"], "the database's recovery fork", "{floored}");
            assert_eq!(floored["recovery_id"], fork.to_string(), "{floored}");
        }
        None => {
            assert_eq!(floored["recovery_id_from"], "a fresh id", "{floored}");
            assert_ne!(floored["recovery_id"], id.as_str(), "{floored}");
        }
    }
    let next = acquired(client.acquire(&busy, LONG).await.unwrap());
    assert!(next.generation() > known_downstream, "{}", next.generation());

    let history = json(&lease_cli(&["history", &held, "--format", "json"], &ado).await);
    let endings: Vec<&str> = history["tenures"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["ending"].as_str())
        .collect();
    assert_eq!(endings, vec!["Superseded", "Superseded"], "{history}");
    db.drop().await;
}

#[tokio::test]
async fn a_recovery_records_the_identity_it_answers_so_the_restore_is_no_longer_reported() {
    let Some(db) =
        TestDatabase::deployed("a_recovery_records_the_identity_it_answers_so_the_restore_is_no_longer_reported").await
    else {
        return;
    };
    let test = "a_recovery_records_the_identity_it_answers_so_the_restore_is_no_longer_reported";
    let current = identity::read_current(&mut *db.session().await).await.unwrap();
    // The identity a restore left. SQL Server shows it (the recovery fork),
    // and the one recorded at deploy time then differs, which `check`
    // reports; Babelfish shows none, so the procedure is given one directly.
    let restored = match current {
        Some(fork) => {
            db.exec(&format!(
                "UPDATE fence.DatabaseIdentity SET RecoveryForkGuid = '{}' WHERE Singleton = 1;",
                Uuid::new_v4()
            ))
            .await;
            assert_eq!(
                identity_rule(&db).await,
                RuleOutcome::Failed,
                "check did not report the restore"
            );
            fork
        }
        None => Uuid::new_v4(),
    };
    db.exec(&format!(
        "EXEC fence_admin.Recover @RecoveryId = '{}', @DatabaseIdentity = '{restored}';",
        Uuid::new_v4()
    ))
    .await;
    let recorded = identity::read_recorded(&mut *db.session().await)
        .await
        .unwrap()
        .expect("the recovery recorded an identity");
    assert_eq!(recorded.recovery_fork, restored);
    assert_eq!(recorded.recorded_by, "recover");
    let after = identity_rule(&db).await;
    assert_ne!(
        after,
        RuleOutcome::Failed,
        "check still reports the restore after the recovery"
    );
    if current.is_some() {
        assert_eq!(after, RuleOutcome::Passed);
    } else {
        support::skip(
            test,
            "the engine shows no recovery fork (sys.database_recovery_status has no row), so FP019 cannot verify \
             and never reports a restore: only the recorded identity and the absence of a finding are checked",
        );
    }
    db.drop().await;
}
