//! `fencepost lease inspect | list | history | force-release` on a live engine,
//! through the fence procedures: what an operator sees, in JSON and as text,
//! and the lever that ends a stuck lease so the next acquirer gets it at
//! once. The tests share one database: each works on keys of its own, and
//! lists only its own prefix.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, Publish, RefusalReason, Release, Renew};
use support::TestDatabase;
use support::binary::{stderr, stdout};
use support::lease::{acquired, json, lease_cli as lease, provisioned, state, unwarmed};
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

/// What a command printed, as lines, after checking its exit code.
fn text_lines(output: &std::process::Output, code: i32) -> Vec<String> {
    let printed = stdout(output);
    assert_eq!(output.status.code(), Some(code), "{printed}{}", stderr(output));
    printed.lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn the_text_output_of_inspect_list_history_and_force_release_says_what_an_operator_needs() {
    let test = "the_text_output_of_inspect_list_history_and_force_release_says_what_an_operator_needs";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    // Listed by a prefix of this test's own: the database is shared.
    let prefix = format!("text-{}:", Uuid::new_v4().simple());
    let free = provisioned(&client, &format!("{prefix}free")).await;
    let held = provisioned(&client, &format!("{prefix}held")).await;
    let first = acquired(client.acquire(&held, Duration::from_secs(600)).await.unwrap());
    assert_eq!(
        client.publish(&first, Uuid::new_v4(), "report").await.unwrap(),
        Publish::Published
    );
    assert_eq!(client.release(&first).await.unwrap(), Release::Released);
    let second = acquired(client.acquire(&held, Duration::from_secs(600)).await.unwrap());
    let free_generation = state(&client, &free).await.0;
    let ado = db.ado();

    let held_line = |line: &str| {
        line.starts_with(&format!("{held}  generation {}  held until ", second.generation()))
            && line.ends_with(&format!("  published generation {}", first.generation()))
    };
    let free_line = format!("{free}  generation {free_generation}  free  nothing published");

    let inspected = text_lines(&lease(&["inspect", &held], &ado).await, 0);
    assert!(inspected.len() == 1 && held_line(&inspected[0]), "{inspected:?}");
    let missing = format!("{prefix}missing");
    assert_eq!(
        text_lines(&lease(&["inspect", &missing], &ado).await, 1),
        [format!("{missing}: no fence row (provision it first)")]
    );

    let listed = text_lines(&lease(&["list", "--prefix", &prefix], &ado).await, 0);
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed[0], free_line);
    assert!(held_line(&listed[1]), "{listed:?}");
    assert_eq!(listed[2], "2 resource(s)");
    let only_held = text_lines(&lease(&["list", "--prefix", &prefix, "--held"], &ado).await, 0);
    assert!(only_held.len() == 2 && held_line(&only_held[0]), "{only_held:?}");
    assert_eq!(only_held[1], "1 held lease(s)");
    let limited = text_lines(&lease(&["list", "--prefix", &prefix, "--limit", "1"], &ado).await, 0);
    assert_eq!(
        limited,
        [
            free_line.clone(),
            "1 resource(s)".to_string(),
            format!("(stopped at --limit 1: there may be more; the next page: --after {free:?})"),
        ]
    );

    let history = text_lines(&lease(&["history", &held], &ado).await, 0);
    assert_eq!(history.len(), 3, "{history:?}");
    assert_eq!(history[0], format!("{held}: 2 tenure(s), newest first"));
    let open = format!("  generation {}  open, held until ", second.generation());
    assert!(
        history[1].starts_with(&open) && history[1].contains("  not published  owner sha256 "),
        "{history:?}"
    );
    let ended = format!("  generation {}  Released ", first.generation());
    assert!(
        history[2].starts_with(&ended) && history[2].contains("  published  owner sha256 "),
        "{history:?}"
    );
    for owner in [first.owner(), second.owner()] {
        let owner = owner.to_string();
        assert!(
            !history.concat().to_lowercase().contains(&owner.to_lowercase()),
            "an owner leaked: {history:?}"
        );
    }

    assert_eq!(
        text_lines(&lease(&["force-release", &held], &ado).await, 0),
        [format!(
            "{held}: fenced; generation is now {}: the holder's next renew, publish or fenced transaction is \
             refused, and the next acquirer gets the lease at once",
            second.generation() + 1
        )]
    );
    assert_eq!(
        text_lines(&lease(&["force-release", &missing], &ado).await, 1),
        [format!("{missing}: no fence row, nothing to release")]
    );
    drop(client);
    db.drop().await;
}
