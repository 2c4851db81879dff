//! The selftest can fail: a fence deployed with a procedure (or a
//! permission script) broken in the way a check exists to catch fails
//! exactly that check. Each test deploys its own database with the shipped
//! T-SQL but for one script, changed by a find and replace; for the checks
//! that run in the scratch database (Recover, PruneTenure), the scratch
//! database is deployed with the broken script instead.
//!
//! Checks with no mutant here, and why:
//! - `snapshot_caller`: on SQL Server the procedures' first data access at
//!   the caller's level (the `fence.Anchor` read) keeps a SNAPSHOT
//!   transaction usable, and an AssertHolder without it would fail the check
//!   with 3951; Babelfish's procedures never take that branch (they do not
//!   change the isolation level there), so no procedure change alters what
//!   this engine does, and the mutant is not run here.
//! - `attention_stops_waiting_publish`: what stops a timed-out publish is the
//!   engine acting on the client's TDS Attention, not the procedure; the check
//!   is skipped on Babelfish, which reads an Attention only after the request ends.
//! - `recovery_fork_visible`: reads the engine's catalog; no fence script is involved.
//! - `lock_bound_inside_caller_transaction` on SQL Server also rests on the
//!   CATCH that turns the lock time-out into 50129; Babelfish's lock time-out
//!   cannot be caught, so that branch never runs here and only the bound
//!   itself has a mutant below.

use crate::support;

use fencepost::deploy::Sources;
use fencepost::selftest::{self, SelftestOptions, Status};
use support::{TestDatabase, binary};

/// The shipped sources with `procedure`'s text changed by `edits`, each a
/// (find, replace) whose find must occur exactly once, so the mutation is
/// the one described.
fn broken(procedure: &str, edits: &[(&str, &str)]) -> Sources {
    let shipped = Sources::embedded().unwrap();
    let mut text = shipped
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == procedure)
        .unwrap()
        .text()
        .to_string();
    for (find, replace) in edits {
        assert_eq!(text.matches(find).count(), 1, "{procedure}: {find:?} occurs once");
        text = text.replacen(find, replace, 1);
    }
    shipped.with_procedure(&format!("{procedure}.sql"), &text).unwrap()
}

/// Runs `check` alone against `db` through the library and asserts it
/// failed, returning what it saw.
async fn failed(db: &TestDatabase, check: &str, mut options: SelftestOptions) -> String {
    options.only(&[check.to_string()]);
    let report = selftest::run(&db.connection_string(), &options, &mut |_| {})
        .await
        .expect("the selftest runs");
    assert_eq!(report.checks.len(), 1);
    let entry = &report.checks[0];
    assert_eq!(entry.name, check);
    assert_eq!(entry.status, Status::Failed, "{check} did not catch it: {}", entry.seen);
    assert!(!report.all_held());
    if let Some(scratch) = &report.scratch_database {
        assert!(scratch.dropped, "{}: {}", scratch.name, scratch.outcome);
    }
    eprintln!("{check} failed, as it should: {}", entry.seen);
    entry.seen.clone()
}

/// The binary says so too: exit 1, the check a JUnit failure.
async fn fails_in_the_binary(db: &TestDatabase, check: &str) {
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
}

/// Deploys `sources` to a database of its own, runs `check` alone through
/// the library and the binary, and asserts it failed, returning what it saw.
async fn fails(test: &str, sources: Sources, check: &str) -> Option<String> {
    let db = deploy(test, &sources).await?;
    let seen = failed(&db, check, SelftestOptions::default()).await;
    fails_in_the_binary(&db, check).await;
    db.drop().await;
    Some(seen)
}

async fn deploy(test: &str, sources: &Sources) -> Option<TestDatabase> {
    let db = TestDatabase::new(test).await?;
    db.migrate(sources).await.expect("deploy with the broken script");
    Some(db)
}

#[tokio::test]
async fn a_publish_without_its_expiry_predicate_fails_publish_after_expiry() {
    let test = "a_publish_without_its_expiry_predicate_fails_publish_after_expiry";
    let sources = broken("fence_api.Publish", &[("           AND LeaseUntilUtc > @Now\n", "")]);
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
        &[(
            "       AND Generation = @Generation\n       AND LeaseUntilUtc > @Now;",
            "       AND Generation = @Generation;",
        )],
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
        &[(
            "     WHERE ResourceKey = @ResourceKey\n       AND Owner = @Owner\n       AND Generation = @Generation;",
            "     WHERE ResourceKey = @ResourceKey;",
        )],
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
        &[(
            "    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;",
            "",
        )],
    );
    let Some(seen) = fails(test, sources, "row_lock_held_by_caller_transaction").await else {
        return;
    };
    assert!(seen.contains("S2 answered the row Acquired"), "{seen}");
}

#[tokio::test]
async fn a_publish_that_ignores_the_generation_fails_the_handover() {
    let test = "a_publish_that_ignores_the_generation_fails_the_handover";
    let sources = broken(
        "fence_api.Publish",
        &[(
            "         WHERE ResourceKey = @ResourceKey\n           AND Owner = @Owner\n           AND Generation = @Generation\n           AND LeaseUntilUtc > @Now\n",
            "         WHERE ResourceKey = @ResourceKey\n",
        )],
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
        &[("N'%', N'\\%'), N'_', N'\\_')", "N'%', N'%'), N'_', N'_')")],
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
        &[(
            "            SELECT @RecordedOutcome AS Outcome, @RecordedGeneration AS Generation;\n            RETURN;",
            "            SELECT @RecordedOutcome AS Outcome, (SELECT Generation FROM fence.Resource \
             WHERE ResourceKey = @ResourceKey) AS Generation;\n            RETURN;",
        )],
    );
    let Some(seen) = fails(test, sources, "force_release_fences_holder").await else {
        return;
    };
    assert!(seen.contains("the replay answered Fenced"), "{seen}");
}

/// Acquire deciding on a read of the row instead of the update that locks
/// it: every session that read the key free before the first one wrote
/// takes it, each with the same generation.
#[tokio::test]
async fn an_acquire_that_reads_the_row_instead_of_locking_it_fails_overlapping_acquisitions() {
    let test = "an_acquire_that_reads_the_row_instead_of_locking_it_fails_overlapping_acquisitions";
    let read = "SELECT @Found = COUNT(*) FROM fence.Resource WHERE ResourceKey = @ResourceKey;";
    let lock = "UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;\n        \
                SET @Found = @@ROWCOUNT;";
    let sources = broken(
        "fence_api.Acquire",
        &[
            (
                &format!("    BEGIN\n        {lock}\n    END;"),
                &format!("    BEGIN\n        {read}\n    END;"),
            ),
            (
                &format!("BEGIN TRY\n        {lock}"),
                &format!("BEGIN TRY\n        {read}"),
            ),
        ],
    );
    let Some(seen) = fails(test, sources, "overlapping_acquisitions").await else {
        return;
    };
    assert!(
        seen.contains("queued behind S1, queued behind S1, queued behind S1, queued behind S1"),
        "{seen}"
    );
    assert!(seen.matches("Acquired (generation 1)").count() >= 2, "{seen}");
}

/// Publish reading the clock before it takes the row: a publish sent while
/// the lease was live and let through after its end commits on the stale
/// reading.
#[tokio::test]
async fn a_publish_that_reads_the_clock_before_locking_the_row_fails_publish_racing_acquisition() {
    let test = "a_publish_that_reads_the_clock_before_locking_the_row_fails_publish_racing_acquisition";
    let sources = broken(
        "fence_api.Publish",
        &[
            (
                "    BEGIN TRANSACTION;\n",
                "    SET @Now = SYSUTCDATETIME();\n    BEGIN TRANSACTION;\n",
            ),
            (
                "    SET @Found = @@ROWCOUNT;\n    SET @Now = SYSUTCDATETIME();\n",
                "    SET @Found = @@ROWCOUNT;\n",
            ),
        ],
    );
    let Some(seen) = fails(test, sources, "publish_racing_acquisition").await else {
        return;
    };
    assert!(seen.contains("queued before the lease's end"), "{seen}");
    assert!(seen.contains("after S1's rollback the publish Published"), "{seen}");
    assert!(
        seen.contains(r#"row generation 1 payload "sent while live (fencepost selftest run "#),
        "{seen}"
    );
}

/// Acquire counting generations from the last publish instead of the last
/// acquisition: after a release with nothing published, the next lease
/// gets the same generation, and a late holder's write would no longer be
/// told apart by it.
#[tokio::test]
async fn an_acquire_that_counts_generations_from_the_last_publish_fails_generation_rises() {
    let test = "an_acquire_that_counts_generations_from_the_last_publish_fails_generation_rises";
    let sources = broken(
        "fence_api.Acquire",
        &[(
            "SET @Generation += 1;",
            "SET @Generation = COALESCE(@PublishedGeneration, 0) + 1;",
        )],
    );
    let Some(seen) = fails(test, sources, "generation_rises").await else {
        return;
    };
    assert!(
        seen.contains("generation 1 → release Released → generation 1"),
        "{seen}"
    );
}

/// Publish without its one-publish-per-generation condition: the second
/// publish's update passes, and only the outcome record's unique key (one
/// record per key and generation) stops it, rolling it back with error
/// 50107 where the contract answers GenerationAlreadyPublished.
#[tokio::test]
async fn a_publish_that_ignores_an_earlier_publish_of_its_generation_fails_one_publish_per_generation() {
    let test = "a_publish_that_ignores_an_earlier_publish_of_its_generation_fails_one_publish_per_generation";
    let sources = broken(
        "fence_api.Publish",
        &[(
            "           AND (PublishedGeneration IS NULL OR PublishedGeneration < @Generation)\n",
            "",
        )],
    );
    let Some(seen) = fails(test, sources, "one_publish_per_generation").await else {
        return;
    };
    assert!(seen.contains("second error:") && seen.contains("50107"), "{seen}");
    assert!(seen.contains(r#"payload "first (fencepost selftest run "#), "{seen}");
}

/// Publish that never looks its operation id up: a replay is judged as a
/// new publish and refused, so a caller settling a lost reply is told its
/// publish did not land when it did.
#[tokio::test]
async fn a_publish_that_does_not_look_up_its_operation_id_fails_replayed_operation_id() {
    let test = "a_publish_that_does_not_look_up_its_operation_id_fails_replayed_operation_id";
    let sources = broken(
        "fence_api.Publish",
        &[(
            "    SELECT @Replay = CASE WHEN ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2\n                           AND Generation = @Generation THEN 1 ELSE 0 END\n      FROM fence.PublishedOperation\n     WHERE OperationId = @OperationId;\n",
            "",
        )],
    );
    let Some(seen) = fails(test, sources, "replayed_operation_id").await else {
        return;
    };
    assert!(seen.contains("replay Refused(GenerationAlreadyPublished)"), "{seen}");
}

/// Publish that records no operation id: a publish whose connection was
/// cut after its commit cannot be settled, GetOutcome answering Unknown for
/// a payload that stands.
#[tokio::test]
async fn a_publish_that_records_no_operation_id_fails_cut_around_commit() {
    let test = "a_publish_that_records_no_operation_id_fails_cut_around_commit";
    let sources = broken(
        "fence_api.Publish",
        &[(
            "                INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc, SourceVersion)\n                VALUES (@OperationId, @ResourceKey, @Generation, @Now, @SourceVersion);\n",
            "                SET @Accepted = 1;\n",
        )],
    );
    let Some(seen) = fails(test, sources, "cut_around_commit").await else {
        return;
    };
    assert!(
        seen.contains("after the commit: Published, then GetOutcome Unknown"),
        "{seen}"
    );
}

/// Acquire without its bound on the wait for the row: a successor inside
/// its own transaction waits for as long as the holder's stays open.
#[tokio::test]
async fn an_acquire_without_its_lock_bound_fails_lock_bound_inside_caller_transaction() {
    let test = "an_acquire_without_its_lock_bound_fails_lock_bound_inside_caller_transaction";
    let sources = broken("fence_api.Acquire", &[("    SET LOCK_TIMEOUT 5000;\n", "")]);
    let check = "lock_bound_inside_caller_transaction";
    // The library alone: each run waits out the check's 15 s before it
    // lets the call go, and the binary's verdict is shown by the other tests.
    let Some(db) = deploy(test, &sources).await else {
        return;
    };
    let seen = failed(&db, check, SelftestOptions::default()).await;
    db.drop().await;
    assert!(seen.contains("it was still waiting after 15 s"), "{seen}");
}

/// Acquire committing every open transaction instead of its own: in
/// implicit-transaction mode the caller's transaction is committed under
/// it, and the caller's rollback no longer undoes the acquisition.
#[tokio::test]
async fn an_acquire_that_commits_the_callers_transaction_fails_implicit_transactions_caller() {
    let test = "an_acquire_that_commits_the_callers_transaction_fails_implicit_transactions_caller";
    let sources = broken(
        "fence_api.Acquire",
        &[(
            "    COMMIT TRANSACTION;\n",
            "    WHILE @@TRANCOUNT > 0\n        COMMIT TRANSACTION;\n",
        )],
    );
    let Some(seen) = fails(test, sources, "implicit_transactions_caller").await else {
        return;
    };
    assert!(seen.contains("@@TRANCOUNT 0"), "{seen}");
}

/// AssertHolder without XACT_ABORT: its refusal leaves the caller's
/// transaction open, so writes made after a lost lock can still commit.
#[tokio::test]
async fn an_assert_holder_without_xact_abort_fails_savepoint_rollback_rule() {
    let test = "an_assert_holder_without_xact_abort_fails_savepoint_rollback_rule";
    let sources = broken("fence_api.AssertHolder", &[("    SET XACT_ABORT ON;\n", "")]);
    let Some(seen) = fails(test, sources, "savepoint_rollback_rule").await else {
        return;
    };
    assert!(seen.ends_with("@@TRANCOUNT 1"), "{seen}");
}

/// A permission script that grants fence_service a procedure of the
/// operators': the service check's ForceRelease is no longer refused.
#[tokio::test]
async fn a_service_role_granted_force_release_fails_service_login_rights() {
    const TEST: &str = "a_service_role_granted_force_release_fails_service_login_rights";
    let shipped = Sources::embedded().unwrap();
    let script = shipped
        .permissions()
        .iter()
        .find(|p| p.file() == "020_fence_service.sql")
        .unwrap()
        .text()
        .to_string();
    let grant = "GRANT EXECUTE ON fence_api.ContractVersion TO fence_service;";
    assert_eq!(script.matches(grant).count(), 1);
    let sources = shipped
        .with_permission(
            "020_fence_service.sql",
            &script.replacen(
                grant,
                &format!("{grant}\nGRANT EXECUTE ON fence_admin.ForceRelease TO fence_service;"),
                1,
            ),
        )
        .unwrap();
    let Some(mut db) = deploy(TEST, &sources).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    if db.is_babelfish().await {
        // Without ownership chaining the service's calls are refused until
        // the procedures run as their owner: the check would fail for that.
        let Some(postgres) = support::babelfish_postgres::postgres_or_skip(TEST) else {
            db.drop().await;
            return;
        };
        support::babelfish_postgres::run_security_definer_script(&postgres, &db.name);
    }
    let mut options = SelftestOptions::default();
    options.service(fencepost::ConnectionString::parse(&service).unwrap());
    let seen = failed(&db, "service_login_rights", options).await;
    db.drop().await;
    assert!(seen.contains("ForceRelease ALLOWED"), "{seen}");
}

/// Runs `check`, which acts on every key of a database, alone in a scratch
/// database deployed with `sources` (the database under test holds the
/// shipped fence), and asserts it failed, returning what it saw and
/// whether the engine is Babelfish.
async fn fails_in_the_scratch_database(test: &str, sources: Sources, check: &str) -> Option<(String, bool)> {
    let db = TestDatabase::deployed(test).await?;
    let babelfish = db.is_babelfish().await;
    let mut options = SelftestOptions::default();
    options.scratch_database(sources);
    let seen = failed(&db, check, options).await;
    db.drop().await;
    Some((seen, babelfish))
}

/// Recover without its bound on the wait for the fence rows (no lock
/// time-out, no tries): behind a transaction that stays open it waits as
/// long as the transaction does, and every call queued behind it with it.
#[tokio::test]
async fn a_recover_without_its_lock_bound_fails_recover_behind_open_transaction() {
    let test = "a_recover_without_its_lock_bound_fails_recover_behind_open_transaction";
    let sources = broken(
        "fence_admin.Recover",
        &[
            (
                "            SET LOCK_TIMEOUT 5000;\n            UPDATE fence.Resource SET LockCount = LockCount + 1;",
                "            UPDATE fence.Resource SET LockCount = LockCount + 1;",
            ),
            (
                "            IF @CallerTransaction = 1\n                SET LOCK_TIMEOUT 5000;\n            ELSE\n                SET LOCK_TIMEOUT 250;\n",
                "",
            ),
        ],
    );
    let Some((seen, _)) = fails_in_the_scratch_database(test, sources, "recover_behind_open_transaction").await else {
        return;
    };
    assert!(seen.contains("it was still waiting after 10 s"), "{seen}");
}

/// Provision without the recovery lock: a key created while a recovery has
/// not committed starts below the floor it raises the fence to, so a
/// generation issued before the restore can be issued again.
#[tokio::test]
async fn a_provision_without_the_recovery_lock_fails_provision_beside_recover() {
    let test = "a_provision_without_the_recovery_lock_fails_provision_beside_recover";
    let sources = broken(
        "fence_api.Provision",
        &[(
            "    EXEC @Lock = sp_getapplock @Resource = @RecoverLock, @LockMode = N'Shared', @LockOwner = N'Transaction';\n    IF @Lock < 0\n        THROW 50127, N'Provision could not take the recovery lock (sp_getapplock answered a timeout or deadlock).', 1;\n",
            "",
        )],
    );
    let Some((seen, _)) = fails_in_the_scratch_database(test, sources, "provision_beside_recover").await else {
        return;
    };
    assert!(
        seen.contains("S3's first Provision ANSWERED WITHOUT WAITING for S2"),
        "{seen}"
    );
    assert!(seen.contains("AT OR BELOW THE FLOOR"), "{seen}");
}

/// PruneTenure deleting every old tenure in one statement: on SQL Server
/// its locks pass 5,000 and escalate to a table lock; on both engines
/// nothing is committed until the whole prune is.
#[tokio::test]
async fn a_prune_in_one_batch_fails_prune_below_lock_escalation() {
    let test = "a_prune_in_one_batch_fails_prune_below_lock_escalation";
    let sources = broken(
        "fence_admin.PruneTenure",
        &[(
            "@BatchSize int = 4000, @Batch int = 4000;",
            "@BatchSize int = 100000, @Batch int = 100000;",
        )],
    );
    let Some((seen, babelfish)) = fails_in_the_scratch_database(test, sources, "prune_below_lock_escalation").await
    else {
        return;
    };
    assert!(seen.contains("Deleted 9000"), "{seen}");
    if babelfish {
        // PostgreSQL never escalates: what shows is that nothing committed.
        assert!(seen.contains("; 0 of the 9000 gone (committed)"), "{seen}");
    }
}
