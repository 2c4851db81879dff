//! The selftest can fail: a fence deployed with a procedure broken in the
//! way a check exists to catch fails exactly that check. Each test deploys
//! its own database with the shipped T-SQL but for one procedure.

use crate::support;

use fencepost::deploy::Sources;
use fencepost::selftest::{self, SelftestOptions, Status};
use support::{TestDatabase, binary};

/// The shipped sources with `procedure`'s `find` replaced by `replace`
/// (which must occur exactly once, so the mutation is the one described).
fn broken(procedure: &str, find: &str, replace: &str) -> Sources {
    let shipped = Sources::embedded().unwrap();
    let text = shipped
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == procedure)
        .unwrap()
        .text()
        .to_string();
    assert_eq!(text.matches(find).count(), 1, "{procedure}: {find:?} occurs once");
    shipped
        .with_procedure(&format!("{procedure}.sql"), &text.replacen(find, replace, 1))
        .unwrap()
}

/// Deploys `sources` to a database of its own, runs `check` alone, and
/// asserts it failed, returning what it saw.
async fn fails(test: &str, sources: Sources, check: &str) -> Option<String> {
    let db = TestDatabase::new(test).await?;
    db.migrate(&sources).await.expect("deploy with the broken procedure");
    let mut options = SelftestOptions::default();
    options.only(&[check.to_string()]);
    let report = selftest::run(&db.connection_string(), &options, &mut |_| {})
        .await
        .expect("the selftest runs");
    assert_eq!(report.checks.len(), 1);
    let entry = &report.checks[0];
    assert_eq!(entry.name, check);
    assert_eq!(entry.status, Status::Failed, "{check} did not catch it: {}", entry.seen);
    assert!(!report.all_held());
    let seen = entry.seen.clone();
    // The binary says so too: exit 1, the check a JUnit failure.
    let output = binary::tokio(binary::fencepost_on(
        &db.ado(),
        ["selftest", "-q", "--format", "junit", "--check", check],
    ))
    .output()
    .await
    .expect("run fencepost");
    let stderr = binary::stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("1 check(s) failed on this engine: {check}")),
        "{stderr}"
    );
    let junit = binary::stdout(&output);
    assert!(junit.contains("<failure"), "{junit}");
    db.drop().await;
    Some(seen)
}

#[tokio::test]
async fn a_publish_without_its_expiry_predicate_fails_publish_after_expiry() {
    let test = "a_publish_without_its_expiry_predicate_fails_publish_after_expiry";
    let sources = broken("fence_api.Publish", "           AND LeaseUntilUtc > @Now\n", "");
    let Some(seen) = fails(test, sources, "publish_after_expiry").await else {
        return;
    };
    assert!(seen.contains("publish Published"), "{seen}");
}

#[tokio::test]
async fn a_renew_that_revives_an_expired_lease_fails_publish_after_expiry() {
    let test = "a_renew_that_revives_an_expired_lease_fails_publish_after_expiry";
    let sources = broken(
        "fence_api.Renew",
        "       AND Generation = @Generation\n       AND LeaseUntilUtc > @Now;",
        "       AND Generation = @Generation;",
    );
    let Some(seen) = fails(test, sources, "publish_after_expiry").await else {
        return;
    };
    assert!(seen.contains("renew Renewed"), "{seen}");
}

#[tokio::test]
async fn a_release_without_the_owner_condition_fails_late_release_and_renew() {
    let test = "a_release_without_the_owner_condition_fails_late_release_and_renew";
    let sources = broken(
        "fence_api.Release",
        "     WHERE ResourceKey = @ResourceKey\n       AND Owner = @Owner\n       AND Generation = @Generation;",
        "     WHERE ResourceKey = @ResourceKey;",
    );
    let Some(seen) = fails(test, sources, "late_release_and_renew").await else {
        return;
    };
    assert!(seen.contains("A's release Released"), "{seen}");
}

#[tokio::test]
async fn an_assert_holder_without_its_row_lock_fails_the_row_lock_check() {
    let test = "an_assert_holder_without_its_row_lock_fails_the_row_lock_check";
    let sources = broken(
        "fence_api.AssertHolder",
        "    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;",
        "",
    );
    let Some(seen) = fails(test, sources, "row_lock_held_by_caller_transaction").await else {
        return;
    };
    assert!(seen.contains("S2 answered Acquired"), "{seen}");
}

#[tokio::test]
async fn a_publish_that_ignores_the_generation_fails_the_handover() {
    let test = "a_publish_that_ignores_the_generation_fails_the_handover";
    let sources = broken(
        "fence_api.Publish",
        "         WHERE ResourceKey = @ResourceKey\n           AND Owner = @Owner\n           AND Generation = @Generation\n           AND LeaseUntilUtc > @Now\n",
        "         WHERE ResourceKey = @ResourceKey\n",
    );
    let Some(seen) = fails(test, sources, "handover").await else {
        return;
    };
    assert!(!seen.contains("A (generation 1) Refused(Superseded)"), "{seen}");
}

#[tokio::test]
async fn a_list_that_leaves_like_wildcards_in_the_prefix_fails_the_literal_prefix_check() {
    let test = "a_list_that_leaves_like_wildcards_in_the_prefix_fails_the_literal_prefix_check";
    let sources = broken(
        "fence_admin.ListLeases",
        "N'%', N'\\%'), N'_', N'\\_')",
        "N'%', N'%'), N'_', N'_')",
    );
    let Some(seen) = fails(test, sources, "list_prefix_is_literal").await else {
        return;
    };
    assert!(seen.contains("50_off → 50%off:b"), "{seen}");
}

#[tokio::test]
async fn a_force_release_replay_that_answers_the_current_generation_fails_the_force_release_check() {
    let test = "a_force_release_replay_that_answers_the_current_generation_fails_the_force_release_check";
    let sources = broken(
        "fence_admin.ForceRelease",
        "            SELECT @RecordedOutcome AS Outcome, @RecordedGeneration AS Generation;\n            RETURN;",
        "            SELECT @RecordedOutcome AS Outcome, (SELECT Generation FROM fence.Resource \
         WHERE ResourceKey = @ResourceKey) AS Generation;\n            RETURN;",
    );
    let Some(seen) = fails(test, sources, "force_release_fences_holder").await else {
        return;
    };
    assert!(seen.contains("the replay answered Fenced"), "{seen}");
}
