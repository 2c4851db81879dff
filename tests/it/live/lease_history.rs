//! `fencepost lease history` and `lease prune` on a live engine: one history
//! row for every way a tenure ends, owners only as hashes, and a prune that
//! deletes only what is older than its bound.

use crate::support;

use std::time::Duration;

use fencepost::client::{Lease, Publish, Release};
use sha2::{Digest, Sha256};
use support::TestDatabase;
use support::lease::{SHORT, acquired, json, lease_cli, provisioned, unwarmed, wait_until_expired, worker};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(600);

/// What the history shows in place of an owner: SHA-256 of its upper-case text.
fn owner_hash(lease: &Lease) -> String {
    hex::encode(Sha256::digest(lease.owner().to_string().to_uppercase().as_bytes()))
}

fn instant(value: &serde_json::Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().expect("a time"), &Rfc3339).expect("RFC 3339")
}

#[tokio::test]
async fn every_way_a_tenure_ends_is_recorded_once_with_its_owner_hashed() {
    let Some(db) = TestDatabase::deployed("every_way_a_tenure_ends_is_recorded_once_with_its_owner_hashed").await
    else {
        return;
    };
    let client = worker(&db.ado()).await;
    let ado = db.ado();
    let key = provisioned(&client, "history").await;

    // Expired and taken over.
    let a = acquired(client.acquire(&key, SHORT).await.unwrap());
    wait_until_expired(&client, &key).await;
    // Published and released in one call.
    let b = acquired(client.acquire(&key, LONG).await.unwrap());
    assert_eq!(
        client.publish_and_release(&b, Uuid::new_v4(), "b").await.unwrap(),
        Publish::Published
    );
    // Released without publishing.
    let c = acquired(client.acquire(&key, LONG).await.unwrap());
    assert_eq!(client.release(&c).await.unwrap(), Release::Released);
    // Ended by an operator.
    let d = acquired(client.acquire(&key, LONG).await.unwrap());
    assert_eq!(lease_cli(&["force-release", &key], &ado).await.status.code(), Some(0));
    // Released after it had run out: recorded as Expired, when it ran out.
    let e = acquired(client.acquire(&key, SHORT).await.unwrap());
    wait_until_expired(&client, &key).await;
    assert_eq!(client.release(&e).await.unwrap(), Release::Released);
    // Voided by a recovery.
    let f = acquired(client.acquire(&key, LONG).await.unwrap());
    let recovered = lease_cli(&["recover", "--id", &Uuid::new_v4().to_string()], &ado).await;
    assert_eq!(recovered.status.code(), Some(0), "{recovered:?}");
    // Still open.
    let g = acquired(client.acquire(&key, LONG).await.unwrap());

    let output = lease_cli(&["history", &key, "--format", "json"], &ado).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let document = json(&output);
    let tenures = document["tenures"].as_array().expect("tenures");
    let seen: Vec<(i64, Option<&str>, bool, &str)> = tenures
        .iter()
        .map(|t| {
            (
                t["generation"].as_i64().unwrap(),
                t["ending"].as_str(),
                t["published"].as_bool().unwrap(),
                t["owner_sha256"].as_str().unwrap(),
            )
        })
        .collect();
    let expected = [
        (g.generation(), None, false, owner_hash(&g)),
        (f.generation(), Some("Superseded"), false, owner_hash(&f)),
        (e.generation(), Some("Expired"), false, owner_hash(&e)),
        (d.generation(), Some("ForceReleased"), false, owner_hash(&d)),
        (c.generation(), Some("Released"), false, owner_hash(&c)),
        (b.generation(), Some("Released"), true, owner_hash(&b)),
        (a.generation(), Some("Expired"), false, owner_hash(&a)),
    ];
    let expected: Vec<(i64, Option<&str>, bool, &str)> = expected
        .iter()
        .map(|(generation, ending, published, hash)| (*generation, *ending, *published, hash.as_str()))
        .collect();
    assert_eq!(seen, expected, "{document}");
    assert_eq!(
        g.owner_hash(),
        owner_hash(&g),
        "the client hashes owners as the engine does"
    );

    // A lease that ran out ended when it ran out, not when it was noticed.
    assert_eq!(instant(&tenures[6]["ended_at_utc"]), a.until(), "{document}");
    assert_eq!(instant(&tenures[2]["ended_at_utc"]), e.until(), "{document}");
    // Every ended tenure began before it ended, and before the next began.
    for pair in tenures.windows(2) {
        let (newer, older) = (&pair[0], &pair[1]);
        assert!(
            instant(&older["acquired_at_utc"]) <= instant(&older["ended_at_utc"]),
            "{document}"
        );
        assert!(
            instant(&older["ended_at_utc"]) <= instant(&newer["acquired_at_utc"]),
            "{document}"
        );
    }
    assert_eq!(
        tenures[0]["lease_until_utc"],
        serde_json::json!(g.until().format(&Rfc3339).unwrap())
    );

    let text = document.to_string().to_uppercase();
    for lease in [&a, &b, &c, &d, &e, &f, &g] {
        assert!(
            !text.contains(&lease.owner().to_string().to_uppercase()),
            "an owner id leaked: {document}"
        );
    }

    let limited = json(&lease_cli(&["history", &key, "--limit", "2", "--format", "json"], &ado).await);
    assert_eq!(limited["tenures"].as_array().unwrap().len(), 2, "{limited}");
    assert_eq!(limited["truncated"], true);

    let missing = lease_cli(&["history", "history:no-such-key"], &ado).await;
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    db.drop().await;
}

#[tokio::test]
async fn a_reader_sees_the_history_but_cannot_prune_or_recover() {
    let Some(mut db) = TestDatabase::deployed("a_reader_sees_the_history_but_cannot_prune_or_recover").await else {
        return;
    };
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "history").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    let reader = db.login_in_role(Some("fence_reader")).await;
    // Babelfish does not chain ownership: the procedures reach the tables
    // only once the PostgreSQL-side script makes them SECURITY DEFINER.
    if db.is_babelfish().await {
        let Ok(postgres) = std::env::var(support::babelfish_postgres::POSTGRES_ENV) else {
            support::skip(
                "a_reader_sees_the_history_but_cannot_prune_or_recover",
                "Babelfish needs FENCEPOST_TEST_POSTGRES to make the procedures SECURITY DEFINER",
            );
            db.drop().await;
            return;
        };
        support::babelfish_postgres::run_security_definer_script(&postgres, &db.name);
    }

    let history = json(&lease_cli(&["history", &key, "--format", "json"], &reader).await);
    assert_eq!(history["tenures"][0]["ending"], "Released", "{history}");

    for args in [&["prune", "--older-than", "30"][..], &["recover"][..]] {
        let output = lease_cli(args, &reader).await;
        assert_eq!(output.status.code(), Some(2), "{args:?} was not refused for a reader");
        let stderr = String::from_utf8_lossy(&output.stderr).to_lowercase();
        assert!(stderr.contains("permission"), "{args:?}: {stderr}");
    }
    let (generation, ..) = support::lease::state(&client, &key).await;
    assert_eq!(
        generation,
        lease.generation(),
        "a refused recover changed the generation"
    );
    db.drop().await;
}

#[tokio::test]
async fn prune_deletes_only_the_tenures_that_ended_before_its_bound() {
    let Some(db) = TestDatabase::deployed("prune_deletes_only_the_tenures_that_ended_before_its_bound").await else {
        return;
    };
    let client = unwarmed(&db.ado()).await;
    let ado = db.ado();
    let key = provisioned(&client, "prune").await;
    let mut generations = Vec::new();
    for _ in 0..3 {
        let lease = acquired(client.acquire(&key, LONG).await.unwrap());
        assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
        generations.push(lease.generation());
    }
    // Age the two oldest tenures as if they had ended 40 days ago.
    db.exec(&format!(
        "UPDATE fence.Tenure SET EndedAtUtc = DATEADD(DAY, -40, EndedAtUtc), \
                AcquiredAtUtc = DATEADD(DAY, -40, AcquiredAtUtc) \
          WHERE ResourceKey = N'{key}' AND Generation IN ({}, {})",
        generations[0], generations[1]
    ))
    .await;

    let pruned = json(&lease_cli(&["prune", "--older-than", "30d", "--format", "json"], &ado).await);
    assert_eq!(pruned["deleted"], 2, "{pruned}");
    let left = json(&lease_cli(&["history", &key, "--format", "json"], &ado).await);
    let left: Vec<i64> = left["tenures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["generation"].as_i64().unwrap())
        .collect();
    assert_eq!(left, vec![generations[2]]);

    let again = json(&lease_cli(&["prune", "--older-than", "30", "--format", "json"], &ado).await);
    assert_eq!(again["deleted"], 0, "{again}");
    let said = lease_cli(&["prune", "--older-than", "30"], &ado).await;
    assert_eq!(said.status.code(), Some(0));
    let said = String::from_utf8_lossy(&said.stdout);
    assert!(
        said.lines().count() == 1 && said.starts_with("pruned 0 tenure(s) that ended before "),
        "{said}"
    );

    let refused = lease_cli(&["prune", "--older-than", "0"], &ado).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--older-than"));
    db.drop().await;
}

#[tokio::test]
async fn an_out_of_range_list_history_prune_or_recover_argument_is_refused_naming_it() {
    let Some(db) =
        TestDatabase::deployed("an_out_of_range_list_history_prune_or_recover_argument_is_refused_naming_it").await
    else {
        return;
    };
    // The operators' procedures share one database: validation needs no state.
    for (sql, number, parameter) in [
        ("EXEC fence_admin.ListLeases @Prefix = NULL", 50120, "@Prefix"),
        ("EXEC fence_admin.ListLeases @HeldOnly = NULL", 50121, "@HeldOnly"),
        ("EXEC fence_admin.ListLeases @MaxRows = 0", 50122, "@MaxRows"),
        (
            "EXEC fence_admin.LeaseHistory @ResourceKey = NULL",
            50101,
            "@ResourceKey",
        ),
        (
            "EXEC fence_admin.LeaseHistory @ResourceKey = N'k', @MaxRows = 0",
            50122,
            "@MaxRows",
        ),
        (
            "EXEC fence_admin.PruneTenure @OlderThanDays = 0",
            50123,
            "@OlderThanDays",
        ),
        (
            "EXEC fence_admin.PruneTenure @OlderThanDays = NULL",
            50123,
            "@OlderThanDays",
        ),
        ("EXEC fence_admin.Recover @RecoveryId = NULL", 50124, "@RecoveryId"),
        (
            "EXEC fence_admin.Recover @RecoveryId = '00000000-0000-0000-0000-000000000000'",
            50124,
            "@RecoveryId",
        ),
        (
            "EXEC fence_admin.Recover @RecoveryId = '6F9619FF-8B86-D011-B42D-00C04FC964FF', @Floor = -1",
            50125,
            "@Floor",
        ),
        (
            "EXEC fence_admin.Recover @RecoveryId = '6F9619FF-8B86-D011-B42D-00C04FC964FF', \
             @DatabaseIdentity = '00000000-0000-0000-0000-000000000000'",
            50126,
            "@DatabaseIdentity",
        ),
    ] {
        let error = db.refusal(sql).await;
        assert_eq!(error.code(), Some(number), "{sql}: {error}");
        assert!(error.to_string().contains(parameter), "{sql}: {error}");
    }
    let open = db.query("SELECT @@TRANCOUNT").await;
    assert_eq!(open[0].get::<i32, _>(0), Some(0), "a refusal left a transaction open");
    let recoveries = db.query("SELECT COUNT(*) FROM fence.Recovery").await;
    assert_eq!(
        recoveries[0].get::<i32, _>(0),
        Some(0),
        "a refused recover was recorded"
    );
    db.drop().await;
}
