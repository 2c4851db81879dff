//! The rights the next deploy needs and the login lacks, each with the
//! statement a DBA runs to grant it: what `status`, a dry run and `migrate`
//! name before a deploy would fail part-way.

use serde::Serialize;

use super::candidates::{Candidate, On, When, candidate, rights_for};
use super::probe::{ProbedRight, ProbedRights};
use super::statements::Statement;
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
    /// answer, or on Babelfish answered 0 for a schema, which it does for
    /// rights held): not a reason to stop, and not shown to be held.
    pub unverified: Vec<MissingRight>,
    /// The statement that gives the login a user of its own before the
    /// grants, when it enters through a Windows group's user (USER_NAME()
    /// then names no database principal a GRANT could name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_user: Option<String>,
    /// While the fence schemas are missing the rights above are asked of
    /// the whole database (the one-step path, near db_owner). The two-step
    /// path: a DBA runs `fencepost script --schemas` (the schemas and roles,
    /// owned by dbo), after which these schema-level rights suffice.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after_schemas: Vec<MissingRight>,
    /// What the statements do beyond granting, for the DBA who runs them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl DeployRights {
    /// Nothing missing and nothing unanswered.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty() && self.unverified.is_empty()
    }

    /// The statements that give every missing right, each once, in order.
    pub fn grants(&self) -> Vec<&str> {
        let mut grants: Vec<&str> = self.create_user.iter().map(String::as_str).collect();
        grants.extend(grant_statements(&self.missing));
        grants
    }

    /// The statements of the two-step path's second step, each once.
    pub fn grants_after_schemas(&self) -> Vec<&str> {
        let mut grants: Vec<&str> = self.create_user.iter().map(String::as_str).collect();
        grants.extend(grant_statements(&self.after_schemas));
        grants
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
    /// The kinds of statement the pending migrations run.
    pub statements: &'a [Statement],
    pub procedure_created: bool,
    /// Schemas in which a procedure is created, altered or dropped.
    pub procedures_changed_in: &'a [&'a str],
    pub procedures_deployed: bool,
    pub procedures_dropped: bool,
    pub permissions_applied: bool,
}

impl Steps<'_> {
    pub(crate) fn take(&self, candidate: &Candidate) -> bool {
        match candidate.when {
            When::MigrationsPending => self.migrations_pending,
            When::MigrationRuns => self
                .statements
                .iter()
                .any(|kind| rights_for(*kind).contains(&candidate.key)),
            When::ProcedureCreated => self.procedure_created,
            When::ProceduresChangedIn(schema) => self.procedures_changed_in.contains(&schema),
            When::ProceduresDeployed => self.procedures_deployed,
            When::ProceduresDropped => self.procedures_dropped,
            When::PermissionsApplied => self.permissions_applied,
            When::EveryDeploy => true,
        }
    }
}

/// Whether `steps` take the candidate named `key` (false for a key that
/// names none).
#[cfg(test)]
pub(crate) fn take_candidate(key: &str, steps: &Steps<'_>) -> bool {
    candidate(key).is_some_and(|c| steps.take(c))
}

/// The probed rights the steps take, as rights a DBA can grant.
pub(crate) fn needed(probed: &ProbedRights, steps: &Steps<'_>) -> DeployRights {
    let mut rights = DeployRights {
        user: probed.user.clone(),
        ..DeployRights::default()
    };
    let mut schemas_missing = false;
    for right in &probed.lacking {
        let Some(candidate) = candidate(&right.key) else {
            continue;
        };
        if !steps.take(candidate) {
            continue;
        }
        schemas_missing |= asked_of_the_database_for_want_of_a_schema(right);
        let missing = MissingRight {
            permission: right.permission.clone(),
            securable: securable(right),
            needed_for: candidate.needed_for.to_string(),
            grant: grant(probed, right),
        };
        // Measured on Babelfish 4.2: HAS_PERMS_BY_NAME on a schema answers 0
        // for SELECT granted on that schema (its tables read), while on a
        // table it answers as SQL Server does: a schema's 0 is no answer.
        let answered = right.held.is_some() && !(probed.babelfish && right.class == "SCHEMA");
        if answered {
            rights.missing.push(missing);
        } else {
            rights.unverified.push(missing);
        }
        if let Some(after) = after_schemas(probed, candidate, right) {
            rights.after_schemas.push(after);
        }
    }
    if schemas_missing && !rights.missing.is_empty() && !probed.babelfish {
        rights.notes.push(
            "the fence schemas do not exist yet, so these rights are asked of the whole database (the one-step \
             path: close to db_owner). The two-step path: a DBA runs `fencepost script --schemas` (it creates the \
             schemas fence, fence_api and fence_admin and the four fence roles, all owned by dbo), after which \
             `fencepost status` names rights on those schemas instead"
                .into(),
        );
    } else {
        rights.after_schemas.clear();
    }
    if probed.group_login && !rights.missing.is_empty() && !probed.babelfish {
        rights.create_user = Some(format!("CREATE USER {};", quote_name(&probed.login)));
        rights.notes.push(format!(
            "{} signs in through a Windows group and has no database user of its own: CREATE USER gives it one, so \
             that the GRANTs reach this login alone (or grant them to the group's user instead, for every member)",
            probed.login
        ));
    }
    if probed.babelfish && !rights.missing.is_empty() {
        rights.notes.push(babelfish_note(probed));
    }
    rights
}

/// A right a candidate asks of the database only because its schema is
/// missing.
fn asked_of_the_database_for_want_of_a_schema(right: &ProbedRight) -> bool {
    right.class == "DATABASE"
        && candidate(&right.key).is_some_and(|c| matches!(c.on, On::Schema(_) | On::Object(..) | On::Role(_)))
}

/// The right as the two-step path grants it once a DBA has created the
/// schemas and roles: on the schema, and none of creating the schemas or
/// roles or making dbo their owner. A right on a table is granted on its
/// schema: `script --schemas` creates no table, so a GRANT naming one fails
/// when the DBA runs it, and the schema's right covers the table once a
/// migration creates it.
fn after_schemas(probed: &ProbedRights, candidate: &Candidate, right: &ProbedRight) -> Option<MissingRight> {
    let (class, securable) = match candidate.on {
        On::Schema(schema) | On::Object(schema, _) => ("SCHEMA", schema.to_string()),
        On::Role(role) => ("ROLE", role.to_string()),
        On::User(_) => return None,
        On::Database if ["create_schema", "create_role"].contains(&candidate.key) => return None,
        On::Database => ("DATABASE", right.securable.clone()),
    };
    let right = ProbedRight {
        key: candidate.key.to_string(),
        permission: candidate.permission.to_string(),
        class: class.to_string(),
        securable,
        held: Some(false),
    };
    Some(MissingRight {
        permission: right.permission.clone(),
        securable: self::securable(&right),
        needed_for: candidate.needed_for.to_string(),
        grant: grant(probed, &right),
    })
}

/// What the Babelfish statement does: Babelfish grants no database-level
/// right, so the login must own the database.
fn babelfish_note(probed: &ProbedRights) -> String {
    let database = quote_name(&probed.database);
    let owner = match probed.owner.as_str() {
        "" => "its current owner".to_string(),
        owner => quote_name(owner),
    };
    let login = quote_name(&probed.login);
    let user = quote_name(&probed.user);
    // The user is dropped with its memberships: the undo gives both back.
    let mut undo =
        format!("ALTER AUTHORIZATION ON DATABASE::{database} TO {owner}; CREATE USER {user} FOR LOGIN {login};");
    for role in &probed.roles {
        undo += &format!(" ALTER ROLE {} ADD MEMBER {user};", quote_name(role));
    }
    let memberships = match probed.roles.as_slice() {
        [] => String::new(),
        roles => format!(
            " Dropping the user also drops its membership in {} (as the owner it enters as dbo and needs none); the \
             undo adds it back.",
            roles.iter().map(|r| quote_name(r)).collect::<Vec<_>>().join(", ")
        ),
    };
    format!(
        "Babelfish grants no database-level right: the statement makes {login} the owner of {database} in place of \
         {owner} (to undo: {undo}). It drops the login's user {user} first (an owner may have none), which Babelfish \
         refuses while that user holds any grant: revoke them first.{memberships} It runs in one transaction, so a \
         refusal changes nothing"
    )
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
            ..ProbedRights::default()
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
        // Measured on Babelfish 4.2: the two fail unless run in this order,
        // and in one transaction a refusal of either leaves both undone.
        let database = quote_name(&probed.database);
        let drop_user = match probed.user.eq_ignore_ascii_case("guest") {
            true => String::new(),
            false => format!("DROP USER {user}; "),
        };
        return format!(
            "USE {database}; SET XACT_ABORT ON; BEGIN TRANSACTION; {drop_user}ALTER AUTHORIZATION ON DATABASE::{database} TO {}; COMMIT TRANSACTION;",
            quote_name(&probed.login)
        );
    }
    let user = match probed.group_login {
        true => quote_name(&probed.login),
        false => user,
    };
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
            ..ProbedRights::default()
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

    /// After `script --schemas` the fence tables do not exist yet: a GRANT
    /// on one of them fails when the DBA runs it. The schema-level right
    /// (and CONTROL on schema fence) covers them once they do.
    #[test]
    fn the_two_step_grants_name_no_table_the_schemas_step_does_not_create() {
        let mut fresh = probed(false);
        fresh.lacking = [
            ("create_schema", "CREATE SCHEMA"),
            ("insert_history", "INSERT"),
            ("insert_journal", "INSERT"),
            ("update_journal", "UPDATE"),
            ("insert_deployment", "INSERT"),
            ("insert_identity", "INSERT"),
            ("insert_fence", "INSERT"),
            ("view_fence_service", "VIEW DEFINITION"),
        ]
        .into_iter()
        .map(|(key, permission)| ProbedRight {
            key: key.into(),
            permission: permission.into(),
            class: "DATABASE".into(),
            securable: "app".into(),
            held: Some(false),
        })
        .collect();
        let steps = Steps {
            migrations_pending: true,
            statements: &[Statement::Insert],
            procedures_deployed: true,
            procedure_created: true,
            permissions_applied: true,
            ..Steps::default()
        };
        let rights = needed(&fresh, &steps);
        let grants = rights.grants_after_schemas();
        // The roles exist after the schemas step, dbo's: the deployer must
        // see each to grant to it.
        assert!(
            grants.contains(&"GRANT VIEW DEFINITION ON ROLE::[fence_service] TO [deploy]]er];"),
            "{grants:?}"
        );
        assert!(
            rights.grants().contains(&"GRANT VIEW DEFINITION TO [deploy]]er];"),
            "{rights:?}"
        );
        assert!(!grants.is_empty(), "{rights:?}");
        assert!(grants.iter().all(|g| !g.contains("OBJECT::")), "{grants:?}");
        assert!(
            grants.contains(&"GRANT INSERT ON SCHEMA::[fence] TO [deploy]]er];"),
            "{grants:?}"
        );
        assert!(
            grants.contains(&"GRANT UPDATE ON SCHEMA::[fence] TO [deploy]]er];"),
            "{grants:?}"
        );
    }

    /// Measured on Babelfish 4.2: DROP USER fails while the user holds any
    /// grant, and ALTER AUTHORIZATION ON DATABASE fails while the login has
    /// a user in the database: run one after the other, the first failure
    /// left the second to fail too, or, with the user gone, the database's
    /// owner replaced with nothing said. In one transaction either both
    /// happen or neither.
    #[test]
    fn on_babelfish_the_owner_change_is_one_transaction_that_a_refusal_leaves_unchanged() {
        let steps = Steps {
            migrations_pending: true,
            ..Steps::default()
        };
        let rights = needed(&probed(true), &steps);
        let grants = rights.grants();
        assert_eq!(grants.len(), 1, "{grants:?}");
        assert!(
            grants[0].contains(
                "SET XACT_ABORT ON; BEGIN TRANSACTION; DROP USER [deploy]]er]; \
                 ALTER AUTHORIZATION ON DATABASE::[app] TO [deploy_login]; COMMIT TRANSACTION;"
            ),
            "{grants:?}"
        );
    }

    /// The owner change drops the user and its role memberships: the note
    /// names them, and its undo gives the user and each membership back.
    #[test]
    fn on_babelfish_the_note_names_the_memberships_the_owner_change_drops_and_undoes_it() {
        let mut probed = probed(true);
        probed.owner = "admin".into();
        probed.roles = vec!["app_readers".into(), "fence_reader".into()];
        let rights = needed(
            &probed,
            &Steps {
                migrations_pending: true,
                ..Steps::default()
            },
        );
        let note = rights.notes.last().expect("a note");
        assert!(
            note.contains(
                "to undo: ALTER AUTHORIZATION ON DATABASE::[app] TO [admin]; CREATE USER [deploy]]er] FOR LOGIN \
                 [deploy_login]; ALTER ROLE [app_readers] ADD MEMBER [deploy]]er]; ALTER ROLE [fence_reader] ADD \
                 MEMBER [deploy]]er];)"
            ),
            "{note}"
        );
        assert!(note.contains("membership in [app_readers], [fence_reader]"), "{note}");
    }

    /// Measured on Babelfish 4.2: HAS_PERMS_BY_NAME on a schema answers 0
    /// for SELECT granted on that schema (the user reads its tables), while
    /// on a table it answers as SQL Server does. A schema's 0 there is no
    /// answer.
    #[test]
    fn on_babelfish_a_schema_right_answered_no_is_unverified_not_missing() {
        let steps = Steps {
            migrations_pending: true,
            procedures_changed_in: &["fence_api"],
            permissions_applied: true,
            ..Steps::default()
        };
        let rights = needed(&probed(true), &steps);
        assert!(
            rights.missing.iter().all(|r| !r.securable.starts_with("SCHEMA::")),
            "{rights:?}"
        );
        assert!(
            rights.unverified.iter().any(|r| r.securable == "SCHEMA::[fence_api]"),
            "{rights:?}"
        );
        // On SQL Server the same answer is a missing right.
        let rights = needed(&probed(false), &steps);
        assert!(
            rights.missing.iter().any(|r| r.securable == "SCHEMA::[fence_api]"),
            "{rights:?}"
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
