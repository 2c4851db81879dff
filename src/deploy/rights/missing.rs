//! The rights the next deploy needs and the login lacks, each with the
//! statement a DBA runs to grant it: what `status`, a dry run and `migrate`
//! name before a deploy would fail part-way.

use serde::Serialize;

use super::candidates::{When, candidate};
use super::probe::{ProbedRight, ProbedRights};
use crate::tsql::quote_name;

/// A right the deploying login lacks for the next deploy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MissingRight {
    /// The permission, as GRANT names it: `CREATE SCHEMA`, `ALTER`, `INSERT`...
    pub permission: String,
    /// What it is needed on, as GRANT names it: `DATABASE::[app]`,
    /// `SCHEMA::[fence]`, `OBJECT::[fence].[Deployment]`, `USER::[dbo]`.
    pub securable: String,
    /// What the deploy does with it.
    pub needed_for: String,
    /// The statement a DBA runs to give it (on Babelfish, which grants no
    /// database-level right, the one that makes the login the database's
    /// owner).
    pub grant: String,
}

/// What the next deploy needs of the login, and what it lacks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeployRights {
    /// The deploying database user.
    pub user: String,
    /// The rights it lacks: a deploy stops before its first change.
    pub missing: Vec<MissingRight>,
    /// Rights the engine would not answer for (HAS_PERMS_BY_NAME gave no
    /// answer): not a reason to stop, and not shown to be held.
    pub unverified: Vec<MissingRight>,
}

impl DeployRights {
    /// Nothing missing and nothing unanswered.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty() && self.unverified.is_empty()
    }

    /// The statements that give every missing right, each once, in order.
    pub fn grants(&self) -> Vec<&str> {
        grant_statements(&self.missing)
    }
}

/// The statements that give `rights`, each once, in order: on Babelfish
/// every right names the same one.
pub(crate) fn grant_statements(rights: &[MissingRight]) -> Vec<&str> {
    let mut grants: Vec<&str> = Vec::new();
    for right in rights {
        if !grants.contains(&right.grant.as_str()) {
            grants.push(&right.grant);
        }
    }
    grants
}

/// What the next deploy does, as far as its rights go.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Steps<'a> {
    pub migrations_pending: bool,
    pub tables_created: bool,
    pub procedure_created: bool,
    /// Schemas in which a procedure is created, altered or dropped.
    pub procedures_changed_in: &'a [&'a str],
    pub procedures_deployed: bool,
    pub procedures_dropped: bool,
    pub permissions_applied: bool,
}

impl Steps<'_> {
    fn take(&self, when: When) -> bool {
        match when {
            When::MigrationsPending => self.migrations_pending,
            When::TablesCreated => self.tables_created,
            When::ProcedureCreated => self.procedure_created,
            When::ProceduresChangedIn(schema) => self.procedures_changed_in.contains(&schema),
            When::ProceduresDeployed => self.procedures_deployed,
            When::ProceduresDropped => self.procedures_dropped,
            When::PermissionsApplied => self.permissions_applied,
            When::EveryDeploy => true,
        }
    }
}

/// The probed rights the steps take, as rights a DBA can grant.
pub(crate) fn needed(probed: &ProbedRights, steps: &Steps<'_>) -> DeployRights {
    let mut rights = DeployRights {
        user: probed.user.clone(),
        ..DeployRights::default()
    };
    for right in &probed.lacking {
        let Some(candidate) = candidate(&right.key) else {
            continue;
        };
        if !steps.take(candidate.when) {
            continue;
        }
        let missing = MissingRight {
            permission: right.permission.clone(),
            securable: securable(right),
            needed_for: candidate.needed_for.to_string(),
            grant: grant(probed, right),
        };
        match right.held {
            Some(_) => rights.missing.push(missing),
            None => rights.unverified.push(missing),
        }
    }
    rights
}

/// The securable as GRANT names it.
fn securable(right: &ProbedRight) -> String {
    match right.class.as_str() {
        "OBJECT" => match right.securable.split_once('.') {
            Some((schema, table)) => format!("OBJECT::{}.{}", quote_name(schema), quote_name(table)),
            None => format!("OBJECT::{}", quote_name(&right.securable)),
        },
        class => format!("{class}::{}", quote_name(&right.securable)),
    }
}

/// Who deploys, as a check outside the state read found it.
pub(crate) struct Who {
    pub user: String,
    pub login: String,
    pub database: String,
    pub babelfish: bool,
}

impl Who {
    /// A right this login lacks, with the statement that gives it.
    pub(crate) fn missing(&self, permission: &str, class: &str, securable: &str, needed_for: String) -> MissingRight {
        let probed = ProbedRights {
            user: self.user.clone(),
            login: self.login.clone(),
            database: self.database.clone(),
            babelfish: self.babelfish,
            lacking: Vec::new(),
        };
        let right = ProbedRight {
            key: String::new(),
            permission: permission.to_string(),
            class: class.to_string(),
            securable: securable.to_string(),
            held: Some(false),
        };
        MissingRight {
            permission: right.permission.clone(),
            securable: self::securable(&right),
            needed_for,
            grant: grant(&probed, &right),
        }
    }
}

/// The statement that gives `right` to the deploying user.
fn grant(probed: &ProbedRights, right: &ProbedRight) -> String {
    let user = quote_name(&probed.user);
    if probed.babelfish {
        // Babelfish refuses every database-level GRANT and members in
        // db_owner; the database's owner enters as dbo and holds everything.
        // A login that owns the database may have no user in it.
        let database = quote_name(&probed.database);
        return format!(
            "USE {database}; DROP USER {user}; ALTER AUTHORIZATION ON DATABASE::{database} TO {};",
            quote_name(&probed.login)
        );
    }
    match right.class.as_str() {
        "DATABASE" => format!("GRANT {} TO {user};", right.permission),
        _ => format!("GRANT {} ON {} TO {user};", right.permission, securable(right)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probed(babelfish: bool) -> ProbedRights {
        let right = |key: &str, permission: &str, class: &str, securable: &str, held| ProbedRight {
            key: key.into(),
            permission: permission.into(),
            class: class.into(),
            securable: securable.into(),
            held,
        };
        ProbedRights {
            user: "deploy]er".into(),
            login: "deploy_login".into(),
            database: "app".into(),
            babelfish,
            lacking: vec![
                right("create_schema", "CREATE SCHEMA", "DATABASE", "app", Some(false)),
                right("alter_fence_api", "ALTER", "SCHEMA", "fence_api", Some(false)),
                right("insert_deployment", "INSERT", "OBJECT", "fence.Deployment", Some(false)),
                right("control_fence", "CONTROL", "SCHEMA", "fence", None),
            ],
        }
    }

    #[test]
    fn only_the_rights_the_next_deploy_takes_are_named_each_with_its_grant() {
        // Nothing pending: the deploy only applies the permission scripts and
        // records itself.
        let steps = Steps {
            permissions_applied: true,
            ..Steps::default()
        };
        let rights = needed(&probed(false), &steps);
        assert_eq!(
            rights.missing,
            vec![MissingRight {
                permission: "INSERT".into(),
                securable: "OBJECT::[fence].[Deployment]".into(),
                needed_for: "recording the deployment in fence.Deployment".into(),
                grant: "GRANT INSERT ON OBJECT::[fence].[Deployment] TO [deploy]]er];".into(),
            }]
        );
        assert_eq!(rights.unverified.len(), 1, "{rights:?}");
        assert_eq!(rights.unverified[0].securable, "SCHEMA::[fence]");

        let fresh = Steps {
            migrations_pending: true,
            procedures_changed_in: &["fence_api"],
            permissions_applied: true,
            ..Steps::default()
        };
        let rights = needed(&probed(false), &fresh);
        let grants = rights.grants();
        assert_eq!(
            grants,
            vec![
                "GRANT CREATE SCHEMA TO [deploy]]er];",
                "GRANT ALTER ON SCHEMA::[fence_api] TO [deploy]]er];",
                "GRANT INSERT ON OBJECT::[fence].[Deployment] TO [deploy]]er];",
            ]
        );
        assert!(!rights.is_complete());
    }

    #[test]
    fn on_babelfish_the_one_fix_is_owning_the_database() {
        let steps = Steps {
            migrations_pending: true,
            ..Steps::default()
        };
        let rights = needed(&probed(true), &steps);
        assert_eq!(rights.missing.len(), 2, "{rights:?}");
        assert_eq!(
            rights.grants(),
            vec!["USE [app]; DROP USER [deploy]]er]; ALTER AUTHORIZATION ON DATABASE::[app] TO [deploy_login];"]
        );
    }

    #[test]
    fn a_role_right_names_the_role_and_its_grant() {
        let who = Who {
            user: "deployer".into(),
            login: "deploy_login".into(),
            database: "app".into(),
            babelfish: false,
        };
        let right = who.missing(
            "ALTER",
            "ROLE",
            "fence_service",
            "adding svc to fence_service (--grant)".into(),
        );
        assert_eq!(right.securable, "ROLE::[fence_service]");
        assert_eq!(right.grant, "GRANT ALTER ON ROLE::[fence_service] TO [deployer];");
        let any = who.missing("ALTER ANY ROLE", "DATABASE", "app", String::new());
        assert_eq!(any.grant, "GRANT ALTER ANY ROLE TO [deployer];");
    }

    #[test]
    fn nothing_lacking_is_complete() {
        let rights = needed(&ProbedRights::default(), &Steps::default());
        assert!(rights.is_complete());
        assert!(rights.grants().is_empty());
    }
}
