//! Comparing what ships with what a database holds: the plan behind
//! `migrate`, `migrate --dry-run` and `status`.

use serde::Serialize;

use super::blocker::Blocker;
use super::rights::{DeployRights, Statement, Statements, Steps, needed};
use super::state::ServerState;
use super::upgrade;
use crate::schema::PROCEDURE_SCHEMAS;
use crate::source::{MigrationSource, Sources};

/// The kinds of statement applying `migration` runs: its batches, and the
/// runner's step before it ([`upgrade::before`]).
pub(crate) fn migration_statements(migration: &MigrationSource) -> Statements {
    let mut found = Statements::default();
    let step = upgrade::before(migration).map(|sql| sql.to_string());
    for sql in step
        .into_iter()
        .chain(migration.batches().iter().map(|b| b.text.clone()))
    {
        let batch = Statements::of(&sql);
        found.known.extend(batch.known);
        found.unknown.extend(batch.unknown);
    }
    found
}

/// Where one migration stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MigrationState {
    /// Applied, and the file still matches what was applied.
    Applied,
    /// Shipped, not applied yet.
    Pending,
    /// Applied, but the shipped file has changed since.
    Divergent,
    /// Applied on the server, but not shipped by this fencepost.
    NotShipped,
}

/// Where one procedure stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProcedureState {
    /// The server holds exactly what was deployed from the shipped text.
    Current,
    /// Shipped, but not on the server.
    Missing,
    /// The shipped text differs from the one last deployed.
    Changed,
    /// The definition on the server is no longer the one deployed (someone
    /// altered it by hand), or it cannot be read (encrypted, or no VIEW
    /// DEFINITION), so it cannot be shown to be the one deployed.
    Drifted,
    /// On the server, but never deployed by fencepost (or its journal entry is gone).
    Untracked,
    /// In a fence schema on the server and never deployed by fencepost (no
    /// journal row): made by hand. A deploy refuses to run until it is gone,
    /// since fencepost cannot tell what it does or who may run it.
    NotShipped,
    /// Deployed by fencepost (its journal row says so) and no longer
    /// shipped: a deploy drops it, so no grant left on it keeps a way into
    /// the fence open.
    Retired,
}

impl ProcedureState {
    /// True when `migrate` would (re)deploy the shipped text.
    pub fn needs_deploy(self) -> bool {
        matches!(self, Self::Missing | Self::Changed | Self::Drifted | Self::Untracked)
    }
}

/// One migration's line in the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MigrationStatus {
    /// The version.
    pub version: i32,
    /// e.g. `V1__lease_tables`.
    pub name: String,
    /// Where it stands.
    pub state: MigrationState,
    /// What it costs a live database (what it locks, for how long, by
    /// edition), for a migration fencepost ships ([`cost::of`](super::cost::of)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<&'static str>,
}

/// One procedure's line in the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcedureStatus {
    /// `schema.name`.
    pub name: String,
    /// Where it stands.
    pub state: ProcedureState,
}

/// What a deploy would do to one database.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Every migration, shipped or found, by version.
    pub migrations: Vec<MigrationStatus>,
    /// Every procedure, shipped or found, by name.
    pub procedures: Vec<ProcedureStatus>,
    /// Permission scripts, all re-applied on every deploy.
    pub permissions: Vec<String>,
    /// The deploying user, when the permission scripts would fail for it
    /// half way: a fence role must be created or given to dbo, and it may
    /// not make dbo a role's owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cannot_give_roles_to_dbo: Option<String>,
    /// A fence schema that exists owned by another principal than dbo, and
    /// its owner: a deploy refuses it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_not_owned_by_dbo: Option<(String, String)>,
    /// Who deploys, and the rights this deploy needs that it lacks, each
    /// with the statement that grants it: a deploy stops before its first
    /// change while any is missing.
    pub rights: DeployRights,
}

impl Plan {
    /// Compares the shipped sources with the server's state.
    pub fn new(sources: &Sources, state: &ServerState) -> Self {
        let mut migrations = Vec::new();
        for shipped in sources.migrations() {
            let applied = state.migrations.iter().find(|a| a.version == shipped.version());
            let m = shipped.migration();
            let migration_state = match applied {
                None => MigrationState::Pending,
                Some(a) if a.name == m.name() && a.checksum == m.checksum() => MigrationState::Applied,
                Some(_) => MigrationState::Divergent,
            };
            migrations.push(MigrationStatus {
                version: shipped.version(),
                cost: super::cost::of(&shipped.name()),
                name: shipped.name(),
                state: migration_state,
            });
        }
        for applied in &state.migrations {
            if !sources.migrations().iter().any(|s| s.version() == applied.version) {
                migrations.push(MigrationStatus {
                    version: applied.version,
                    name: format!("V{}__{}", applied.version, applied.name),
                    state: MigrationState::NotShipped,
                    cost: None,
                });
            }
        }
        migrations.sort_by_key(|m| m.version);

        let mut procedures = Vec::new();
        for shipped in sources.procedures() {
            let name = shipped.qualified_name();
            let on_server = state.procedures.iter().find(|p| p.name.eq_ignore_ascii_case(&name));
            let procedure_state = match on_server {
                None => ProcedureState::Missing,
                Some(p) if !p.exists => ProcedureState::Missing,
                // It exists, so a deploy must alter it, never create it; and
                // what it holds cannot be shown to be what was deployed.
                Some(p) if p.definition_hash.is_none() => ProcedureState::Drifted,
                Some(p) if p.deployed_checksum.is_none() || p.deployed_definition_hash.is_none() => {
                    ProcedureState::Untracked
                }
                Some(p) if p.deployed_definition_hash != p.definition_hash => ProcedureState::Drifted,
                Some(p) if p.deployed_checksum.as_deref() != Some(shipped.checksum()) => ProcedureState::Changed,
                Some(_) => ProcedureState::Current,
            };
            procedures.push(ProcedureStatus {
                name,
                state: procedure_state,
            });
        }
        for found in &state.procedures {
            let shipped = sources
                .procedures()
                .iter()
                .any(|s| s.qualified_name().eq_ignore_ascii_case(&found.name));
            if !shipped && found.exists {
                let state = match found.deployed_checksum {
                    Some(_) => ProcedureState::Retired,
                    None => ProcedureState::NotShipped,
                };
                procedures.push(ProcedureStatus {
                    name: found.name.clone(),
                    state,
                });
            }
        }
        procedures.sort_by(|a, b| a.name.cmp(&b.name));

        let permissions = sources.permissions().iter().map(|p| p.file().to_string()).collect();
        let mut plan = Self {
            cannot_give_roles_to_dbo: state.cannot_give_roles_to_dbo.clone(),
            schema_not_owned_by_dbo: state.rights.schema_not_owned_by_dbo.clone(),
            migrations,
            procedures,
            permissions,
            rights: DeployRights::default(),
        };
        plan.rights = plan.needed_rights(sources, state);
        plan
    }

    /// The rights the login lacks that this plan's deploy takes.
    fn needed_rights(&self, sources: &Sources, state: &ServerState) -> DeployRights {
        let pending: Vec<i32> = self.pending_migrations().map(|m| m.version).collect();
        let mut statements: Vec<Statement> = sources
            .migrations()
            .iter()
            .filter(|m| pending.contains(&m.version()))
            .flat_map(|m| migration_statements(m).known)
            .collect();
        if !pending.is_empty() && state.migrations.is_empty() {
            // The runner creates the history table before the first migration.
            statements.push(Statement::CreateTable);
        }
        let changed: Vec<&ProcedureStatus> = self.procedures_to_deploy().chain(self.procedures_to_drop()).collect();
        let schemas: Vec<&str> = PROCEDURE_SCHEMAS
            .into_iter()
            .filter(|schema| {
                changed.iter().any(|p| {
                    p.name
                        .split_once('.')
                        .is_some_and(|(s, _)| s.eq_ignore_ascii_case(schema))
                })
            })
            .collect();
        let steps = Steps {
            migrations_pending: !pending.is_empty(),
            statements: &statements,
            procedure_created: self.procedures.iter().any(|p| p.state == ProcedureState::Missing),
            procedures_changed_in: &schemas,
            procedures_deployed: self.procedures_to_deploy().next().is_some(),
            procedures_dropped: self.procedures_to_drop().next().is_some(),
            permissions_applied: !self.permissions.is_empty(),
        };
        needed(&state.rights, &steps)
    }

    /// Migrations a deploy would apply.
    pub fn pending_migrations(&self) -> impl Iterator<Item = &MigrationStatus> {
        self.migrations.iter().filter(|m| m.state == MigrationState::Pending)
    }

    /// Procedures a deploy would create or alter.
    pub fn procedures_to_deploy(&self) -> impl Iterator<Item = &ProcedureStatus> {
        self.procedures.iter().filter(|p| p.state.needs_deploy())
    }

    /// Procedures fencepost deployed and no longer ships, which a deploy drops.
    pub fn procedures_to_drop(&self) -> impl Iterator<Item = &ProcedureStatus> {
        self.procedures.iter().filter(|p| p.state == ProcedureState::Retired)
    }

    /// True when nothing is pending, changed, drifted or unknown.
    pub fn is_current(&self) -> bool {
        self.migrations.iter().all(|m| m.state == MigrationState::Applied)
            && self.procedures.iter().all(|p| p.state == ProcedureState::Current)
    }

    /// Why a deploy of this plan would stop before changing anything: the
    /// history's [`blocker`](Self::blocker), then, unless told to overwrite
    /// it, the [`drift`](Self::drift).
    pub fn would_stop(&self, overwrite_drift: bool) -> Option<Blocker> {
        self.blocker().or_else(|| self.drift().filter(|_| !overwrite_drift))
    }

    /// The shipped procedures whose definition on the server is not the one
    /// deployed, as a refusal to overwrite them.
    pub fn drift(&self) -> Option<Blocker> {
        let names: Vec<String> = self
            .procedures
            .iter()
            .filter(|p| p.state == ProcedureState::Drifted)
            .map(|p| p.name.clone())
            .collect();
        (!names.is_empty()).then_some(Blocker::Drift { names })
    }

    /// The reason a deploy must not proceed, if there is one: the database's
    /// history does not agree with what ships. A pending migration older than
    /// an applied one is refused here, before anything runs: applied after
    /// it, it would run against a schema its author never saw.
    pub fn blocker(&self) -> Option<Blocker> {
        let latest = self
            .migrations
            .iter()
            .filter(|m| m.state != MigrationState::Pending)
            .max_by_key(|m| m.version);
        // A history this fencepost does not ship comes first: a migration a
        // newer fencepost applied also makes every shipped pending one look
        // out of order, and the fix is the newer fencepost, not a new version.
        let history = self.migrations.iter().find_map(|m| match m.state {
            MigrationState::Divergent => Some(Blocker::DivergentMigration { name: m.name.clone() }),
            MigrationState::NotShipped => Some(Blocker::UnknownMigration { name: m.name.clone() }),
            MigrationState::Pending | MigrationState::Applied => None,
        });
        history
            .or_else(|| {
                self.migrations
                    .iter()
                    .filter(|m| m.state == MigrationState::Pending)
                    .find_map(|m| {
                        latest
                            .filter(|l| l.version > m.version)
                            .map(|l| Blocker::OutOfOrderMigration {
                                name: m.name.clone(),
                                latest: l.name.clone(),
                            })
                    })
            })
            .or_else(|| {
                self.schema_not_owned_by_dbo
                    .clone()
                    .map(|(schema, owner)| Blocker::SchemaNotOwnedByDbo { schema, owner })
            })
            .or_else(|| {
                self.procedures
                    .iter()
                    .find(|p| p.state == ProcedureState::NotShipped)
                    .map(|p| Blocker::HandMadeProcedure { name: p.name.clone() })
            })
            .or_else(|| {
                self.cannot_give_roles_to_dbo
                    .clone()
                    .filter(|_| !self.permissions.is_empty())
                    .map(|user| Blocker::RolesNeedImpersonate { user })
            })
            .or_else(|| {
                (!self.rights.missing.is_empty()).then(|| Blocker::MissingRights {
                    user: self.rights.user.clone(),
                    rights: self.rights.missing.clone(),
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{applied, deployed, sources};
    use super::super::state::{AppliedMigration, ServerProcedure};
    use super::*;

    #[test]
    fn a_fence_schema_another_principal_owns_stops_the_deploy_naming_its_owner() {
        let mut state = ServerState::default();
        state.rights.schema_not_owned_by_dbo = Some(("fence".into(), "mallory".into()));
        let stop = Plan::new(&sources(), &state)
            .would_stop(true)
            .expect("a deploy would stop");
        assert_eq!(
            stop,
            Blocker::SchemaNotOwnedByDbo {
                schema: "fence".into(),
                owner: "mallory".into()
            }
        );
        assert!(
            stop.to_string().contains("ALTER AUTHORIZATION ON SCHEMA::fence TO dbo"),
            "{stop}"
        );
    }

    #[test]
    fn a_deployer_that_may_not_give_the_roles_to_dbo_is_stopped_before_anything_runs() {
        let state = ServerState {
            cannot_give_roles_to_dbo: Some("deployer".into()),
            ..ServerState::default()
        };
        let plan = Plan::new(&sources(), &state);
        let stop = plan.would_stop(true).expect("a deploy would stop");
        assert_eq!(
            stop,
            Blocker::RolesNeedImpersonate {
                user: "deployer".into()
            }
        );
        assert!(
            stop.to_string().contains("IMPERSONATE ON USER::dbo TO [deployer]"),
            "{stop}"
        );
        let without_scripts = Plan::new(&sources().without_permissions(), &state);
        assert_eq!(without_scripts.blocker(), None);
    }

    #[test]
    fn an_empty_database_needs_everything() {
        let plan = Plan::new(&sources(), &ServerState::default());
        assert_eq!(plan.pending_migrations().count(), 2);
        assert_eq!(plan.procedures[0].state, ProcedureState::Missing);
        assert!(!plan.is_current());
        assert!(plan.blocker().is_none());
    }

    #[test]
    fn a_deployed_database_is_current() {
        let s = sources();
        let state = ServerState {
            migrations: vec![applied(&s, 0), applied(&s, 1)],
            procedures: vec![deployed(&s, "H1")],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        assert!(plan.is_current(), "{plan:?}");
        assert_eq!(plan.procedures_to_deploy().count(), 0);
    }

    #[test]
    fn a_hand_edited_procedure_is_drifted() {
        let s = sources();
        let state = ServerState {
            migrations: vec![applied(&s, 0), applied(&s, 1)],
            procedures: vec![deployed(&s, "H2")],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        assert_eq!(plan.procedures[0].state, ProcedureState::Drifted);
        assert!(!plan.is_current());
    }

    #[test]
    fn a_procedure_whose_definition_cannot_be_read_is_drifted_not_missing() {
        let s = sources();
        let mut unreadable = deployed(&s, "H1");
        unreadable.definition_hash = None;
        let state = ServerState {
            migrations: vec![applied(&s, 0), applied(&s, 1)],
            procedures: vec![unreadable],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        assert_eq!(plan.procedures[0].state, ProcedureState::Drifted);
        assert_eq!(plan.procedures_to_deploy().count(), 1);
    }

    /// A procedure the login sees but whose definition it cannot read, with
    /// no journal row.
    fn unreadable(name: &str) -> ServerProcedure {
        ServerProcedure {
            name: name.into(),
            exists: true,
            definition_hash: None,
            deployed_checksum: None,
            deployed_definition_hash: None,
        }
    }

    fn only(procedure: ServerProcedure) -> ServerState {
        ServerState {
            migrations: vec![],
            procedures: vec![procedure],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        }
    }

    #[test]
    fn an_unreadable_procedure_never_deployed_by_fencepost_is_drifted_not_missing() {
        let plan = Plan::new(&sources(), &only(unreadable("fence_api.P")));
        assert_eq!(plan.procedures[0].state, ProcedureState::Drifted);
    }

    #[test]
    fn a_procedure_with_only_a_journal_row_is_missing() {
        let s = sources();
        let mut dropped = deployed(&s, "H1");
        dropped.exists = false;
        dropped.definition_hash = None;
        assert_eq!(
            Plan::new(&s, &only(dropped)).procedures[0].state,
            ProcedureState::Missing
        );
    }

    #[test]
    fn an_unshipped_procedure_is_reported_even_when_its_definition_cannot_be_read() {
        let plan = Plan::new(&sources(), &only(unreadable("fence_api.Repair")));
        assert!(
            plan.procedures
                .iter()
                .any(|p| p.name == "fence_api.Repair" && p.state == ProcedureState::NotShipped),
            "{plan:?}"
        );
    }

    #[test]
    fn a_changed_shipped_text_is_changed() {
        let s = sources();
        let mut p = deployed(&s, "H1");
        p.deployed_checksum = Some("older".into());
        let state = ServerState {
            migrations: vec![applied(&s, 0), applied(&s, 1)],
            procedures: vec![p],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        assert_eq!(Plan::new(&s, &state).procedures[0].state, ProcedureState::Changed);
    }

    #[test]
    fn an_edited_applied_migration_blocks_the_deploy() {
        let s = sources();
        let mut first = applied(&s, 0);
        first.checksum ^= 1;
        let plan = Plan::new(
            &s,
            &ServerState {
                migrations: vec![first],
                procedures: vec![],
                cannot_give_roles_to_dbo: None,
                rights: Default::default(),
            },
        );
        assert_eq!(plan.migrations[0].state, MigrationState::Divergent);
        assert!(matches!(plan.blocker(), Some(Blocker::DivergentMigration { .. })));
    }

    /// V3__c, which the fixture sources do not ship.
    fn from_a_newer_fencepost() -> AppliedMigration {
        AppliedMigration {
            version: 3,
            name: "c".into(),
            applied_on: String::new(),
            checksum: 1,
        }
    }

    #[test]
    fn a_migration_from_a_newer_fencepost_blocks_the_deploy() {
        let s = sources();
        let newer = from_a_newer_fencepost();
        let state = ServerState {
            migrations: vec![applied(&s, 0), applied(&s, 1), newer],
            procedures: vec![],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        assert!(matches!(plan.blocker(), Some(Blocker::UnknownMigration { ref name }) if name == "V3__c"));
    }

    #[test]
    fn a_migration_from_a_newer_fencepost_is_the_blocker_though_a_shipped_one_is_pending_below_it() {
        let s = sources();
        let newer = from_a_newer_fencepost();
        let state = ServerState {
            migrations: vec![applied(&s, 0), newer],
            procedures: vec![],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        assert_eq!(plan.migrations[1].state, MigrationState::Pending);
        assert!(
            matches!(plan.blocker(), Some(Blocker::UnknownMigration { ref name }) if name == "V3__c"),
            "{:?}",
            plan.blocker()
        );
    }

    #[test]
    fn a_pending_migration_older_than_an_applied_one_blocks_the_deploy_by_name() {
        let s = sources();
        let plan = Plan::new(
            &s,
            &ServerState {
                migrations: vec![applied(&s, 1)],
                procedures: vec![],
                cannot_give_roles_to_dbo: None,
                rights: Default::default(),
            },
        );
        let blocker = plan.blocker().expect("an out-of-order migration blocks");
        assert!(
            matches!(&blocker, Blocker::OutOfOrderMigration { name, latest } if name == "V1__a" && latest == "V2__b"),
            "{blocker:?}"
        );
        assert!(blocker.to_string().contains("V1__a"), "{blocker}");
    }

    #[test]
    fn a_procedure_fencepost_deployed_and_no_longer_ships_is_retired_and_dropped() {
        let s = sources();
        let mut retired = deployed(&s, "H1");
        retired.name = "fence_api.Old".into();
        let state = ServerState {
            migrations: vec![applied(&s, 0), applied(&s, 1)],
            procedures: vec![deployed(&s, "H1"), retired],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        let dropped: Vec<&str> = plan.procedures_to_drop().map(|p| p.name.as_str()).collect();
        assert_eq!(dropped, ["fence_api.Old"]);
        assert!(plan.blocker().is_none(), "{:?}", plan.blocker());
        assert!(!plan.is_current());
    }

    #[test]
    fn a_hand_made_procedure_in_a_fence_schema_blocks_the_deploy_by_name() {
        let s = sources();
        let state = ServerState {
            migrations: vec![applied(&s, 0), applied(&s, 1)],
            procedures: vec![deployed(&s, "H1"), unreadable("fence_admin.Backdoor")],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        assert_eq!(plan.procedures_to_drop().count(), 0);
        assert!(
            matches!(plan.blocker(), Some(Blocker::HandMadeProcedure { ref name }) if name == "fence_admin.Backdoor"),
            "{:?}",
            plan.blocker()
        );
    }

    #[test]
    fn an_unshipped_procedure_in_a_fence_schema_is_reported() {
        let s = sources();
        let rogue = ServerProcedure {
            name: "fence_api.Repair".into(),
            exists: true,
            definition_hash: Some("X".into()),
            deployed_checksum: None,
            deployed_definition_hash: None,
        };
        let state = ServerState {
            migrations: vec![],
            procedures: vec![deployed(&s, "H1"), rogue],
            cannot_give_roles_to_dbo: None,
            rights: Default::default(),
        };
        let plan = Plan::new(&s, &state);
        assert!(
            plan.procedures
                .iter()
                .any(|p| p.name == "fence_api.Repair" && p.state == ProcedureState::NotShipped)
        );
    }
}

#[cfg(test)]
mod migration_rights {
    use super::super::fixtures::applied;
    use super::super::rights::{ProbedRights, probe_query, rights_for, take_candidate};
    use super::*;
    use crate::deploy::rights::ProbedRight;

    /// V4 and V7 insert into dbo's tables, V1 creates a foreign key: a
    /// deployer lacking INSERT or REFERENCES on schema fence is named so
    /// before the deploy, not failed by the migration after those before it
    /// committed.
    #[test]
    fn a_pending_migration_that_inserts_or_references_names_those_rights() {
        let shipped = Sources::embedded().unwrap();
        let lacking = |key: &str, permission: &str| ProbedRight {
            key: key.into(),
            permission: permission.into(),
            class: "SCHEMA".into(),
            securable: "fence".into(),
            held: Some(false),
        };
        let probe = probe_query();
        for key in ["insert_fence", "references_fence"] {
            assert!(probe.contains(&format!("N''{key}''")), "{key} is never asked: {probe}");
        }
        // V1 to V6 applied: V7 (which inserts fence.Retirement's row) pending.
        let state = ServerState {
            migrations: (0..6).map(|i| applied(&shipped, i)).collect(),
            rights: ProbedRights {
                user: "deployer".into(),
                lacking: vec![
                    lacking("insert_fence", "INSERT"),
                    lacking("references_fence", "REFERENCES"),
                ],
                ..ProbedRights::default()
            },
            ..ServerState::default()
        };
        let plan = Plan::new(&shipped, &state);
        let named: Vec<&str> = plan.rights.missing.iter().map(|r| r.grant.as_str()).collect();
        assert!(
            named.contains(&"GRANT INSERT ON SCHEMA::[fence] TO [deployer];"),
            "{named:?}"
        );
        // V7 creates no foreign key.
        assert!(!named.iter().any(|g| g.contains("REFERENCES")), "{named:?}");
        // The identity is asked for while its table holds no row, not only
        // while the table is missing.
        assert!(
            probe.contains("NOT EXISTS (SELECT 1 FROM fence.DatabaseIdentity)"),
            "{probe}"
        );

        let fresh = Plan::new(
            &shipped,
            &ServerState {
                migrations: vec![],
                ..state
            },
        );
        let named: Vec<&str> = fresh.rights.missing.iter().map(|r| r.grant.as_str()).collect();
        assert!(
            named.contains(&"GRANT REFERENCES ON SCHEMA::[fence] TO [deployer];"),
            "{named:?}"
        );
    }

    /// Every statement of every shipped migration is of a kind whose rights
    /// the check asks for, and asks for when that migration is pending: a
    /// migration that runs a statement of a new kind fails here until the
    /// kind and its rights are added (statements.rs, candidates.rs).
    #[test]
    fn every_statement_of_every_migration_takes_only_rights_the_check_asks_for() {
        let shipped = Sources::embedded().unwrap();
        for migration in shipped.migrations() {
            let file = migration.file();
            let found = migration_statements(migration);
            assert!(
                found.unknown.is_empty(),
                "{file} runs statements whose rights the deploy's check does not know: {:?}",
                found.unknown
            );
            assert!(!found.known.is_empty(), "{file}: no statement found");
            let kinds: Vec<Statement> = found.known.iter().copied().collect();
            let steps = Steps {
                migrations_pending: true,
                statements: &kinds,
                ..Steps::default()
            };
            for kind in &kinds {
                let keys = rights_for(*kind);
                assert!(!keys.is_empty(), "{file}: {kind:?} takes no right");
                for key in keys {
                    assert!(
                        take_candidate(key, &steps),
                        "{file}: {kind:?} takes {key}, which the check does not ask for while {file} is pending"
                    );
                }
            }
        }
        let kinds = |name: &str| {
            let m = shipped.migrations().iter().find(|m| m.name() == name).unwrap();
            migration_statements(m).known
        };
        assert!(kinds("V4__row_lock_counter").contains(&Statement::Insert));
        assert!(kinds("V7__lifecycle").contains(&Statement::Insert));
        assert!(kinds("V1__lease_tables").contains(&Statement::ForeignKey));
        // V2's foreign key is in dynamic SQL, and the runner's step before it updates.
        let v2 = kinds("V2__exact_resource_keys");
        assert!(
            v2.contains(&Statement::ForeignKey) && v2.contains(&Statement::Update),
            "{v2:?}"
        );
    }
}
