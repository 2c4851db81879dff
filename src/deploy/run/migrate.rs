//! `fencepost migrate`: bring one database to what ships, under the deploy
//! lock, and say what changed. The order of the steps, the re-planning after
//! migrations and what a failure leaves are decided here, over a
//! [`Target`], so they are tested without a server.

use std::time::Instant;

use super::options::{MigrateOptions, Progress};
use super::read::shipped_names;
use super::session::Session;
use super::target::Target;
use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::deploy::plan::Plan;
use crate::deploy::report::{Change, Committed, MigrateReport};
use crate::deploy::sql::record_deployment;
use crate::deploy::state::ServerState;
use crate::identity;
use crate::source::Sources;

/// Deploys `sources` to the database `conn` is connected to: what
/// `fencepost migrate` does, for a tool of your own.
///
/// ```no_run
/// # async fn deploy() -> Result<(), Box<dyn std::error::Error>> {
/// use fencepost::ConnectionString;
/// use fencepost::deploy::{MigrateOptions, Sources, migrate};
///
/// let target = ConnectionString::parse("Server=tcp:db,1433;Database=app;User ID=deploy;Password=...;Encrypt=true")?;
/// let mut conn = target.connect().await?;
/// // The T-SQL this version of the crate ships.
/// let sources = Sources::embedded()?;
/// let report = migrate(&mut conn, &sources, &MigrateOptions::default(), &mut |progress| {
///     eprintln!("{progress:?}")
/// })
/// .await?;
/// println!("{} change(s), deployment {:?}", report.changes.len(), report.deployment_id);
/// # Ok(())
/// # }
/// ```
pub async fn migrate(
    conn: &mut Connection,
    sources: &Sources,
    options: &MigrateOptions,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<MigrateReport, DeployError> {
    deploy(&mut Session::new(conn), sources, options, on_progress).await
}

/// The plan for `sources` from the state `target` holds now, read without
/// the deploy lock: what `status` and a dry run show.
pub(crate) async fn read_plan(target: &mut impl Target, sources: &Sources) -> Result<Plan, DeployError> {
    Ok(Plan::new(sources, &target.read_state(&shipped_names(sources)).await?))
}

/// Deploys `sources` to `target`: under the lock, migrations, then the
/// procedures as the migrations left them, then, in one request, the
/// permission scripts, the record of the deployment and the release.
async fn deploy(
    target: &mut impl Target,
    sources: &Sources,
    options: &MigrateOptions,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<MigrateReport, DeployError> {
    if options.dry_run {
        let plan = read_plan(target, sources).await?;
        let would_stop = plan.would_stop(options.overwrite_drift);
        return Ok(MigrateReport {
            plan,
            changes: Vec::new(),
            permissions_applied: Vec::new(),
            dry_run: true,
            lock_wait_seconds: 0.0,
            round_trips: target.round_trips(),
            deployment_id: None,
            database_identity: None,
            warnings: Vec::new(),
            would_stop,
        });
    }

    let shipped = shipped_names(sources);
    on_progress(Progress::WaitingForLock);
    let (waited, state) = target.lock_and_read_state(options.lock_timeout, &shipped).await?;
    let mut done = Committed::default();
    let plan = match deploy_locked(target, sources, options, &shipped, state, &mut done, on_progress).await {
        Ok(plan) => plan,
        Err(error) => {
            // The first error is the one worth reporting.
            let _ = target.release().await;
            return Err(stopped_part_way(done, error));
        }
    };
    // The permission scripts, the record of the deployment, then the release
    // of the lock, in one request.
    let record = record_deployment(
        &count_of(&done.changes, |c| matches!(c, Change::Migration { .. })),
        &count_of(&done.changes, |c| matches!(c, Change::Procedure { .. })),
    );
    let run = target
        .apply_permissions_and_release(sources.permissions(), &record)
        .await;
    for script in &sources.permissions()[..run.applied] {
        on_progress(Progress::PermissionsApplied {
            file: script.file().to_string(),
        });
        done.permissions_applied.push(script.file().to_string());
    }
    if let Some(error) = run.error {
        return Err(stopped_part_way(done, error));
    }
    let database_identity = run
        .recorded
        .map(|r| identity::compare(r.recorded_identity, r.current_identity));
    Ok(MigrateReport {
        plan,
        changes: done.changes,
        permissions_applied: done.permissions_applied,
        dry_run: false,
        lock_wait_seconds: waited.as_secs_f64(),
        round_trips: target.round_trips(),
        deployment_id: run.recorded.and_then(|r| r.id),
        database_identity,
        warnings: MigrateReport::identity_warnings(database_identity),
        would_stop: None,
    })
}

/// How many of `changes` are of one kind, as a T-SQL int literal.
fn count_of(changes: &[Change], kind: impl Fn(&Change) -> bool) -> String {
    changes.iter().filter(|c| kind(c)).count().to_string()
}

/// `error`, wrapped with what committed before it when anything did.
fn stopped_part_way(done: Committed, error: DeployError) -> DeployError {
    let committed = Committed::new(done.changes, done.permissions_applied);
    if committed.is_empty() {
        error
    } else {
        DeployError::Incomplete {
            committed: Box::new(committed),
            cause: Box::new(error),
        }
    }
}

/// Applies migrations, then procedures, noting in `done` each change as it
/// commits; returns the plan as found (from `state`, read under the lock)
/// before any change.
async fn deploy_locked(
    target: &mut impl Target,
    sources: &Sources,
    options: &MigrateOptions,
    shipped: &[String],
    state: ServerState,
    done: &mut Committed,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Plan, DeployError> {
    let plan = Plan::new(sources, &state);
    // Drift is judged before migrations run: one of them may alter a
    // procedure itself.
    if let Some(blocker) = plan.would_stop(options.overwrite_drift) {
        return Err(DeployError::Blocked(blocker));
    }

    let mut after_migrations = plan.clone();
    if plan.pending_migrations().next().is_some() {
        apply_migrations(target, sources, &plan, options, done, on_progress).await?;
        // A migration may have dropped or altered a shipped procedure (to
        // change a type it depends on): plan procedures from what is there now.
        after_migrations = Plan::new(sources, &target.read_state(shipped).await?);
    }

    for status in after_migrations.procedures_to_deploy() {
        let Some(procedure) = sources.procedures().iter().find(|p| p.qualified_name() == status.name) else {
            continue;
        };
        target.deploy_procedure(procedure).await?;
        on_progress(Progress::ProcedureDeployed {
            name: status.name.clone(),
            was: status.state,
        });
        done.changes.push(Change::Procedure {
            name: status.name.clone(),
            was: status.state,
        });
    }

    for status in after_migrations.procedures_to_drop() {
        target.drop_procedure(&status.name).await?;
        on_progress(Progress::ProcedureDropped {
            name: status.name.clone(),
        });
        done.changes.push(Change::RetiredProcedure {
            name: status.name.clone(),
        });
    }

    Ok(plan)
}

/// Applies the plan's pending migrations in version order, noting each that
/// commits. The plan already refused what refinery's runner would (a
/// divergent, unknown or out-of-order migration), from the history read
/// under the lock, so nothing is read again here.
async fn apply_migrations(
    target: &mut impl Target,
    sources: &Sources,
    plan: &Plan,
    options: &MigrateOptions,
    done: &mut Committed,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(), DeployError> {
    target.create_history().await?;
    for pending in plan.pending_migrations() {
        let Some(migration) = sources.migrations().iter().find(|m| m.version() == pending.version) else {
            continue;
        };
        on_progress(Progress::MigrationStarted { name: migration.name() });
        let started = Instant::now();
        target
            .apply_migration(migration, options.migration_lock_timeout)
            .await?;
        on_progress(Progress::MigrationCommitted {
            name: migration.name(),
            seconds: started.elapsed().as_secs_f64(),
        });
        done.changes.push(Change::Migration { name: migration.name() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use uuid::Uuid;

    use super::*;
    use crate::deploy::blocker::Blocker;
    use crate::deploy::fixtures::{applied, deployed, sources};
    use crate::deploy::plan::ProcedureState;
    use crate::deploy::run::permissions::{PermissionsRun, RecordedDeployment};
    use crate::deploy::state::{AppliedMigration, ServerProcedure};
    use crate::source::{MigrationSource, ProcedureSource, ScriptSource};

    /// A database that answers from a script and records what the deploy
    /// asked of it, one line per call.
    #[derive(Default)]
    struct Recorder {
        calls: Vec<String>,
        /// The state under the lock, then the state of each later read.
        states: VecDeque<ServerState>,
        /// The call that fails, e.g. `apply V2__b`.
        fails: Option<&'static str>,
        /// What the last request answers; every script applied when `None`.
        last_request: Option<PermissionsRun>,
        /// The record of the deployment the last request was given.
        record: String,
    }

    impl Recorder {
        fn with_states(states: impl IntoIterator<Item = ServerState>) -> Self {
            Self {
                states: states.into_iter().collect(),
                ..Self::default()
            }
        }

        fn call(&mut self, call: String) -> Result<(), DeployError> {
            let failed = self.fails == Some(call.as_str());
            self.calls.push(call.clone());
            match failed {
                true => Err(injected(&call)),
                false => Ok(()),
            }
        }

        fn next_state(&mut self) -> ServerState {
            self.states.pop_front().expect("a state for every read")
        }
    }

    fn injected(call: &str) -> DeployError {
        DeployError::BatchFailed {
            file: call.to_string(),
            batch: 1,
            line: 1,
            message: "error 50000: injected".into(),
        }
    }

    impl Target for Recorder {
        async fn lock_and_read_state(
            &mut self,
            _timeout: Duration,
            _shipped: &[String],
        ) -> Result<(Duration, ServerState), DeployError> {
            self.calls.push("lock".into());
            if self.fails == Some("lock") {
                return Err(DeployError::LockTimeout {
                    waited: Duration::from_secs(1),
                    holder: None,
                });
            }
            Ok((Duration::from_millis(250), self.next_state()))
        }

        async fn read_state(&mut self, _shipped: &[String]) -> Result<ServerState, DeployError> {
            self.call("read".into())?;
            Ok(self.next_state())
        }

        async fn create_history(&mut self) -> Result<(), DeployError> {
            self.call("create history".into())
        }

        async fn apply_migration(&mut self, migration: &MigrationSource, _: Duration) -> Result<(), DeployError> {
            self.call(format!("apply {}", migration.name()))
        }

        async fn deploy_procedure(&mut self, procedure: &ProcedureSource) -> Result<(), DeployError> {
            self.call(format!("deploy {}", procedure.qualified_name()))
        }

        async fn drop_procedure(&mut self, name: &str) -> Result<(), DeployError> {
            self.call(format!("drop {name}"))
        }

        async fn apply_permissions_and_release(&mut self, scripts: &[ScriptSource], record: &str) -> PermissionsRun {
            self.calls.push("permissions and release".into());
            self.record = record.to_string();
            self.last_request.take().unwrap_or(PermissionsRun {
                applied: scripts.len(),
                recorded: Some(RecordedDeployment::default()),
                error: None,
            })
        }

        async fn release(&mut self) -> Result<(), DeployError> {
            self.call("release".into())
        }

        fn round_trips(&self) -> usize {
            self.calls.len()
        }
    }

    fn state(migrations: Vec<AppliedMigration>, procedures: Vec<ServerProcedure>) -> ServerState {
        ServerState {
            migrations,
            procedures,
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        }
    }

    /// The database as a finished deploy leaves it.
    fn current(sources: &Sources) -> ServerState {
        state(
            vec![applied(sources, 0), applied(sources, 1)],
            vec![deployed(sources, "H1")],
        )
    }

    async fn run(
        target: &mut Recorder,
        options: &MigrateOptions,
    ) -> (Result<MigrateReport, DeployError>, Vec<Progress>) {
        let mut seen = Vec::new();
        let result = deploy(target, &sources(), options, &mut |p| seen.push(p)).await;
        (result, seen)
    }

    async fn deploy_to(target: &mut Recorder) -> Result<MigrateReport, DeployError> {
        run(target, &MigrateOptions::default()).await.0
    }

    #[tokio::test]
    async fn a_blocked_plan_changes_nothing_and_releases_the_lock() {
        let s = sources();
        let mut edited = applied(&s, 0);
        edited.checksum ^= 1;
        let mut target = Recorder::with_states([state(vec![edited], vec![])]);
        let error = deploy_to(&mut target).await.unwrap_err();
        assert!(
            matches!(&error, DeployError::Blocked(Blocker::DivergentMigration { name }) if name == "V1__a"),
            "{error:?}"
        );
        assert_eq!(target.calls, ["lock", "release"]);
    }

    #[tokio::test]
    async fn drift_stops_the_deploy_unless_told_to_overwrite_it() {
        let s = sources();
        let drifted = || state(vec![applied(&s, 0), applied(&s, 1)], vec![deployed(&s, "H2")]);
        let mut target = Recorder::with_states([drifted()]);
        let error = deploy_to(&mut target).await.unwrap_err();
        assert!(
            matches!(&error, DeployError::Blocked(Blocker::Drift { names }) if names == &["fence_api.P"]),
            "{error:?}"
        );
        assert_eq!(target.calls, ["lock", "release"]);

        let mut target = Recorder::with_states([drifted()]);
        let options = MigrateOptions {
            overwrite_drift: true,
            ..MigrateOptions::default()
        };
        let report = run(&mut target, &options).await.0.unwrap();
        assert_eq!(target.calls, ["lock", "deploy fence_api.P", "permissions and release"]);
        assert_eq!(
            report.changes,
            [Change::Procedure {
                name: "fence_api.P".into(),
                was: ProcedureState::Drifted
            }]
        );
    }

    #[tokio::test]
    async fn procedures_are_planned_from_the_state_the_migrations_left() {
        let s = sources();
        // V2 is pending and P current; V2 drops P.
        let before = state(vec![applied(&s, 0)], vec![deployed(&s, "H1")]);
        let after = state(vec![applied(&s, 0), applied(&s, 1)], vec![]);
        let mut target = Recorder::with_states([before, after]);
        let (report, progress) = run(&mut target, &MigrateOptions::default()).await;
        let report = report.unwrap();
        assert_eq!(
            target.calls,
            [
                "lock",
                "create history",
                "apply V2__b",
                "read",
                "deploy fence_api.P",
                "permissions and release"
            ]
        );
        assert_eq!(
            report.changes,
            [
                Change::Migration { name: "V2__b".into() },
                Change::Procedure {
                    name: "fence_api.P".into(),
                    was: ProcedureState::Missing
                }
            ]
        );
        // The report's plan is the one found under the lock, before any change.
        assert_eq!(report.plan.procedures[0].state, ProcedureState::Current);
        assert_eq!(report.permissions_applied, ["010_roles.sql"]);
        let committed = progress
            .iter()
            .any(|p| matches!(p, Progress::MigrationCommitted { name, .. } if name == "V2__b"));
        assert!(committed, "{progress:?}");
    }

    #[tokio::test]
    async fn without_pending_migrations_the_state_is_not_read_again() {
        let mut target = Recorder::with_states([current(&sources())]);
        let report = deploy_to(&mut target).await.unwrap();
        assert!(report.changes.is_empty(), "{:?}", report.changes);
        assert_eq!(target.calls, ["lock", "permissions and release"]);
        assert_eq!(report.round_trips, 2);
        assert_eq!(report.lock_wait_seconds, 0.25);
    }

    #[tokio::test]
    async fn a_retired_procedure_is_dropped_after_the_shipped_ones_are_deployed() {
        let s = sources();
        let mut retired = deployed(&s, "H1");
        retired.name = "fence_api.Old".into();
        let mut target = Recorder::with_states([state(vec![applied(&s, 0), applied(&s, 1)], vec![retired])]);
        let report = deploy_to(&mut target).await.unwrap();
        assert_eq!(
            target.calls,
            [
                "lock",
                "deploy fence_api.P",
                "drop fence_api.Old",
                "permissions and release"
            ]
        );
        assert_eq!(
            report.changes.last(),
            Some(&Change::RetiredProcedure {
                name: "fence_api.Old".into()
            })
        );
    }

    #[tokio::test]
    async fn a_failure_after_a_commit_says_what_committed_and_releases_the_lock() {
        let mut target = Recorder::with_states([ServerState::default()]);
        target.fails = Some("apply V2__b");
        let error = deploy_to(&mut target).await.unwrap_err();
        let DeployError::Incomplete { committed, cause } = &error else {
            panic!("not incomplete: {error:?}");
        };
        assert_eq!(committed.changes, [Change::Migration { name: "V1__a".into() }]);
        assert!(committed.permissions_applied.is_empty());
        assert!(matches!(cause.as_ref(), DeployError::BatchFailed { file, .. } if file == "apply V2__b"));
        assert_eq!(
            target.calls,
            ["lock", "create history", "apply V1__a", "apply V2__b", "release"]
        );
    }

    #[tokio::test]
    async fn a_failure_before_anything_committed_is_the_error_alone_and_the_lock_is_released() {
        let mut target = Recorder::with_states([state(current(&sources()).migrations, vec![])]);
        target.fails = Some("deploy fence_api.P");
        let error = deploy_to(&mut target).await.unwrap_err();
        assert!(
            matches!(&error, DeployError::BatchFailed { file, .. } if file == "deploy fence_api.P"),
            "{error:?}"
        );
        assert_eq!(target.calls, ["lock", "deploy fence_api.P", "release"]);
    }

    #[tokio::test]
    async fn a_lock_not_taken_is_not_released() {
        let mut target = Recorder {
            fails: Some("lock"),
            ..Recorder::default()
        };
        let error = deploy_to(&mut target).await.unwrap_err();
        assert!(matches!(error, DeployError::LockTimeout { .. }), "{error:?}");
        assert_eq!(target.calls, ["lock"]);
    }

    #[tokio::test]
    async fn a_failed_permission_script_keeps_what_committed_and_leaves_the_release_to_the_last_request() {
        let mut target = Recorder::with_states([state(current(&sources()).migrations, vec![])]);
        target.last_request = Some(PermissionsRun {
            applied: 0,
            recorded: None,
            error: Some(injected("permissions/010_roles.sql")),
        });
        let error = deploy_to(&mut target).await.unwrap_err();
        let DeployError::Incomplete { committed, .. } = &error else {
            panic!("not incomplete: {error:?}");
        };
        assert_eq!(committed.without_grants, ["fence_api.P"]);
        assert_eq!(target.calls, ["lock", "deploy fence_api.P", "permissions and release"]);
    }

    #[tokio::test]
    async fn a_dry_run_reads_the_plan_without_the_lock_and_changes_nothing() {
        let mut target = Recorder::with_states([ServerState::default()]);
        let options = MigrateOptions {
            dry_run: true,
            ..MigrateOptions::default()
        };
        let (report, progress) = run(&mut target, &options).await;
        let report = report.unwrap();
        assert!(report.dry_run && report.changes.is_empty());
        assert_eq!(report.plan.pending_migrations().count(), 2);
        assert_eq!(target.calls, ["read"]);
        assert!(progress.is_empty(), "{progress:?}");
    }

    #[tokio::test]
    async fn the_record_counts_what_this_deploy_applied_and_a_changed_identity_is_a_warning() {
        let mut target = Recorder::with_states([ServerState::default(), ServerState::default()]);
        target.last_request = Some(PermissionsRun {
            applied: 1,
            recorded: Some(RecordedDeployment {
                id: Some(7),
                recorded_identity: Some(Uuid::from_u128(1)),
                current_identity: Some(Uuid::from_u128(2)),
            }),
            error: None,
        });
        let report = deploy_to(&mut target).await.unwrap();
        assert!(
            target
                .record
                .contains("DECLARE @MigrationsApplied int = 2, @ProceduresApplied int = 1;"),
            "{}",
            target.record
        );
        assert_eq!(report.deployment_id, Some(7));
        assert!(report.database_identity.is_some_and(|i| i.is_changed()));
        assert_eq!(report.warnings, [crate::identity::RESTORED_MESSAGE]);
    }
}
