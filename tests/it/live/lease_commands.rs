//! `fencepost lease inspect | list | force-release` on a live engine, through
//! the fence procedures: what an operator sees, and the lever that ends a
//! stuck lease so the next acquirer gets it at once. The tests share one
//! database: each works on keys of its own, and lists only its own prefix.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, Publish, RefusalReason, Renew};
use support::TestDatabase;
use support::lease::{acquired, json, lease_cli as lease, provisioned, unwarmed};
use uuid::Uuid;

#[tokio::test]
async fn inspect_and_list_show_leases_without_owners() {
    let Some(db) = TestDatabase::shared("inspect_and_list_show_leases_without_owners").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    // Listed by a prefix of this test's own: the database is shared.
    let prefix = format!("report-{}:", Uuid::new_v4().simple());
    let held = provisioned(&client, &format!("{prefix}held")).await;
    let free = provisioned(&client, &format!("{prefix}free")).await;
    let other = provisioned(&client, "invoice").await;
    let lease_on_held = acquired(client.acquire(&held, Duration::from_secs(600)).await.unwrap());
    let ado = db.ado();

    let inspected = lease(&["inspect", &held, "--format", "json"], &ado).await;
    assert_eq!(inspected.status.code(), Some(0));
    let document = json(&inspected);
    assert_eq!(document["lease"]["generation"], lease_on_held.generation());
    assert_eq!(document["lease"]["is_held"], true);
    assert!(
        !document.to_string().contains(&lease_on_held.owner().to_string()),
        "an owner leaked"
    );

    let missing = lease(&["inspect", "report:nothing-here"], &ado).await;
    assert_eq!(missing.status.code(), Some(1));

    let listed = json(&lease(&["list", "--prefix", &prefix, "--format", "json"], &ado).await);
    let keys: Vec<&str> = listed["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    let mut expected = vec![free.as_str(), held.as_str()];
    expected.sort();
    assert_eq!(keys, expected, "{listed}");
    assert!(!keys.contains(&other.as_str()));

    let only_held = json(&lease(&["list", "--prefix", &prefix, "--held", "--format", "json"], &ado).await);
    assert_eq!(only_held["leases"].as_array().unwrap().len(), 1, "{only_held}");
    assert_eq!(only_held["leases"][0]["key"], held.as_str());

    let limited = json(&lease(&["list", "--prefix", &prefix, "--limit", "1", "--format", "json"], &ado).await);
    assert_eq!(limited["leases"].as_array().unwrap().len(), 1);
    assert_eq!(limited["truncated"], true);
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn force_release_fences_the_holder_out_and_frees_the_key_at_once() {
    let Some(db) = TestDatabase::shared("force_release_fences_the_holder_out_and_frees_the_key_at_once").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let (holder, successor) = (unwarmed(&db.ado()).await, unwarmed(&db.ado()).await);
    let key = provisioned(&holder, "stuck").await;
    let mut stuck = acquired(holder.acquire(&key, Duration::from_secs(600)).await.unwrap());

    let output = lease(&["force-release", &key, "--format", "json"], &db.ado()).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document = json(&output);
    assert_eq!(document["outcome"], "Fenced");
    assert_eq!(document["generation"], stuck.generation() + 1);

    assert_eq!(holder.renew(&mut stuck).await.unwrap(), Renew::Lost);
    assert_eq!(
        holder.publish(&stuck, Uuid::new_v4(), "late").await.unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );
    assert!(matches!(
        successor.acquire(&key, Duration::from_secs(30)).await.unwrap(),
        Acquire::Acquired(_)
    ));

    let missing = lease(&["force-release", "no-such-key"], &db.ado()).await;
    assert_eq!(missing.status.code(), Some(1));
    drop((holder, successor));
    db.drop().await;
}
