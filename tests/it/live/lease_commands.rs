//! `fencepost lease inspect | list | history | force-release` on a live engine,
//! through the fence procedures: what an operator sees, in JSON and as text,
//! and the lever that ends a stuck lease so the next acquirer gets it at
//! once. The tests share one database: each works on keys of its own, and
//! lists only its own prefix.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, Inspection, Publish, RefusalReason, Release, Renew};
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

#[tokio::test]
async fn force_release_and_reset_source_version_print_their_operation_id_and_a_rerun_with_it_changes_nothing() {
    let test = "force_release_and_reset_source_version_print_their_operation_id_and_a_rerun_with_it_changes_nothing";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "operation").await;
    let stuck = acquired(client.acquire(&key, Duration::from_secs(600)).await.unwrap());
    let ado = db.ado();
    let succeeded = |output: &std::process::Output| {
        assert_eq!(output.status.code(), Some(0), "{}{}", stdout(output), stderr(output));
        json(output)
    };

    // A fresh id, printed so a rerun can name it.
    let fenced = succeeded(&lease(&["force-release", &key, "--format", "json"], &ado).await);
    assert_eq!(fenced["generation"], stuck.generation() + 1);
    let printed: Uuid = fenced["operation_id"].as_str().unwrap().parse().unwrap();
    assert!(!printed.is_nil());

    // A service acquires; the operator reruns the same command with its id:
    // the same answer, and the service keeps its lease.
    let mut successor = acquired(client.acquire(&key, Duration::from_secs(600)).await.unwrap());
    let id = printed.to_string();
    let rerun = succeeded(
        &lease(
            &["force-release", &key, "--operation-id", &id, "--format", "json"],
            &ado,
        )
        .await,
    );
    assert_eq!(
        (&rerun["outcome"], &rerun["generation"], &rerun["operation_id"]),
        (&fenced["outcome"], &fenced["generation"], &fenced["operation_id"])
    );
    assert!(matches!(
        client.renew(&mut successor).await.unwrap(),
        Renew::Renewed { .. }
    ));

    // The same for a reset, whose rerun answers the first one's previous
    // version; the id is its own, and names one source version.
    let reset_id = Uuid::new_v4().to_string();
    let reset = |version: &'static str| {
        let (ado, key, reset_id) = (ado.clone(), key.clone(), reset_id.clone());
        async move {
            lease(
                &[
                    "reset-source-version",
                    &key,
                    version,
                    "--operation-id",
                    &reset_id,
                    "--format",
                    "json",
                ],
                &ado,
            )
            .await
        }
    };
    let first = succeeded(&reset("7").await);
    assert_eq!(
        (&first["outcome"], &first["previous_source_version"]),
        (&"Reset".into(), &serde_json::Value::Null)
    );
    assert_eq!(first["operation_id"], reset_id.as_str());
    let another = succeeded(&lease(&["reset-source-version", &key, "9", "--format", "json"], &ado).await);
    assert_eq!(another["previous_source_version"], 7);
    assert_ne!(another["operation_id"], first["operation_id"], "a fresh id per command");
    let replayed = succeeded(&reset("7").await);
    assert_eq!(replayed["previous_source_version"], first["previous_source_version"]);
    assert_eq!(
        source_version(&client, &key).await,
        Some(9),
        "the replay lowered nothing"
    );

    // The id of another command, or another version, is refused naming it.
    let refused = lease(&["force-release", &key, "--operation-id", &reset_id], &ado).await;
    assert_ne!(refused.status.code(), Some(0));
    assert!(stderr(&refused).contains("@OperationId"), "{}", stderr(&refused));
    let other_version = reset("8").await;
    assert_ne!(other_version.status.code(), Some(0));
    let nil = lease(
        &["force-release", &key, "--operation-id", &Uuid::nil().to_string()],
        &ado,
    )
    .await;
    assert_ne!(nil.status.code(), Some(0));
    assert!(stderr(&nil).contains("@OperationId"), "{}", stderr(&nil));
    assert_eq!(
        state(&client, &key).await.0,
        successor.generation(),
        "nothing was fenced again"
    );
    drop(client);
    db.drop().await;
}

/// The source version `key` is fenced by.
async fn source_version(client: &fencepost::Client, key: &str) -> Option<i64> {
    match client.inspect(key).await.unwrap() {
        Inspection::Found(state) => state.source_version,
        Inspection::NotProvisioned => panic!("{key} is not provisioned"),
    }
}

/// A lease set is inspected by naming its keys, and a resource's slots are
/// listed with how many are held, in JSON and as text, never with an owner.
#[tokio::test]
async fn inspect_shows_each_key_of_a_set_and_slots_lists_a_resources_slots() {
    let Some(db) = TestDatabase::shared("inspect_shows_each_key_of_a_set_and_slots_lists_a_resources_slots").await
    else {
        return;
    };
    let client = unwarmed(&db.ado()).await;
    let ado = db.ado();
    let keys = [
        provisioned(&client, "set-inspect").await,
        provisioned(&client, "set-inspect").await,
    ];
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let fencepost::client::AcquireSet::Acquired(set) =
        client.acquire_set(&refs, Duration::from_secs(600)).await.unwrap()
    else {
        panic!("the set was not acquired");
    };
    let missing = format!("set-inspect-missing:{}", Uuid::new_v4().simple());

    let inspected = lease(&["inspect", &keys[0], &keys[1], "--format", "json"], &ado).await;
    assert_eq!(inspected.status.code(), Some(0), "{}", stderr(&inspected));
    let document = json(&inspected);
    let shown = document.as_array().expect("one object per key");
    assert_eq!(shown.len(), 2);
    for (object, key) in shown.iter().zip(&keys) {
        assert_eq!(object["key"], key.as_str(), "one object per key, in the order given");
        let lease = set.lease(key).unwrap();
        assert_eq!(object["lease"]["generation"], lease.generation());
        assert_eq!(object["lease"]["is_held"], true);
    }
    assert!(
        !document.to_string().contains(&set.owner().to_string()),
        "an owner leaked"
    );
    let with_missing = text_lines(&lease(&["inspect", &keys[0], &missing], &ado).await, 1);
    assert_eq!(with_missing.len(), 2, "{with_missing:?}");
    assert!(with_missing[1].contains("no fence row"), "{with_missing:?}");

    let resource = format!("slots-cli-{}", Uuid::new_v4().simple());
    client.provision_slots(&resource, 3).await.unwrap();
    client.provision(&format!("{resource}#01")).await.unwrap();
    let fencepost::client::AcquireSlot::Acquired {
        slot,
        lease: slot_lease,
    } = client
        .acquire_slot(&resource, 3, Duration::from_secs(600))
        .await
        .unwrap()
    else {
        panic!("no slot was granted");
    };
    let listed = lease(&["slots", &resource, "--format", "json"], &ado).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let document = json(&listed);
    assert_eq!(document["held"], 1);
    let slots = document["slots"].as_array().unwrap();
    let numbers: Vec<u64> = slots.iter().map(|s| s["slot"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1, 2], "#01 spells no slot");
    assert_eq!(slots[slot as usize]["is_held"], true);
    assert_eq!(slots[slot as usize]["generation"], slot_lease.generation());
    assert!(
        !document.to_string().contains(&slot_lease.owner().to_string()),
        "an owner leaked"
    );
    let text = text_lines(&lease(&["slots", &resource], &ado).await, 0);
    assert_eq!(
        text.last().map(String::as_str),
        Some("1 of 3 provisioned slot(s) held"),
        "{text:?}"
    );
    let none = lease(&["slots", &format!("no-slots-{}", Uuid::new_v4().simple())], &ado).await;
    assert_eq!(none.status.code(), Some(1), "{}", stdout(&none));

    assert!(
        client
            .release_set(&set)
            .await
            .unwrap()
            .iter()
            .all(|(_, r)| *r == Release::Released)
    );
    assert_eq!(client.release(&slot_lease).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}
