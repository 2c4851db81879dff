//! Turns the answers of the catalog queries, in their order, into a
//! [`Catalog`].

use std::collections::HashMap;

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{
    Catalog, DatabaseSettings, Dependency, DeployedProcedure, Engine, FenceTableFeature, IdentityReading, JobEditor,
    JobStep, LinkedLogin, LinkedServer, LinkedServers, LoginKind, Membership, Object, ObjectKind, Permission,
    PermissionState, Principal, PrincipalKind, Schema, Securable, ServerSettings, ServerTrigger, ServiceQueue,
    TableFeature,
};
use super::facts::{is_visible_marker, server, trustworthy, visibility};
use super::rows::{int, required, text, uuid};

pub(super) type Next<'a> = dyn FnMut() -> (Option<Vec<Row>>, &'static str) + 'a;

pub(super) fn build(next: &mut Next) -> Result<Catalog, AuditError> {
    let mut catalog = Catalog::default();

    let (rows, what) = next();
    let row = rows
        .as_deref()
        .and_then(|r| r.first())
        .ok_or(AuditError::UnexpectedShape {
            what,
            reason: "no row".into(),
        })?;
    catalog.database = text(row, 0, what)?.unwrap_or_default();
    catalog.engine = Engine {
        chains_ownership: int(row, 1, what)? == Some(1),
        product: text(row, 2, what)?.unwrap_or_default(),
        azure_database: int(row, 3, what)? == Some(1),
        security_definer: None,
    };

    let (rows, what) = next();
    catalog.visibility = match rows {
        None => None,
        Some(rows) => Some(visibility(&rows, what)?),
    };

    let (rows, what) = next();
    catalog.settings = match rows.as_deref().and_then(|r| r.first()) {
        Some(row) => Some(DatabaseSettings {
            trustworthy: int(row, 0, what)? == Some(1),
            db_chaining: int(row, 1, what)? == Some(1),
        }),
        None => None,
    };

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let kind = match text(row, 1, what)?.as_deref().map(str::trim) {
            Some("R") => PrincipalKind::Role,
            Some("A") => PrincipalKind::ApplicationRole,
            Some("G" | "X") => PrincipalKind::Group,
            _ => PrincipalKind::User,
        };
        let mut principal = Principal::new(required(row, 0, what)?, kind);
        principal.owner = text(row, 2, what)?;
        principal.default_schema = text(row, 3, what)?.filter(|s| !s.is_empty());
        catalog.principals.push(principal);
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let user = required(row, 0, what)?;
        let login = text(row, 1, what)?;
        let kind = text(row, 2, what)?.as_deref().and_then(LoginKind::from_type);
        if let Some(p) = catalog
            .principals
            .iter_mut()
            .find(|p| p.name.eq_ignore_ascii_case(&user))
        {
            p.login = login;
            p.login_kind = kind;
        }
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        catalog.memberships.push(Membership {
            role: required(row, 0, what)?,
            member: required(row, 1, what)?,
        });
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        if let Some(p) = permission(row, what)? {
            catalog.permissions.push(p);
        }
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        catalog.schemas.push(Schema {
            name: required(row, 0, what)?,
            owner: text(row, 1, what)?.unwrap_or_default(),
        });
    }

    let (rows, what) = next();
    let mut by_id = HashMap::new();
    for row in rows.iter().flatten() {
        let kind = match text(row, 3, what)?.as_deref().map(str::trim) {
            Some("U") => ObjectKind::Table,
            Some("P" | "PC") => ObjectKind::Procedure,
            Some("V") => ObjectKind::View,
            Some("TR" | "TA") => ObjectKind::Trigger,
            _ => ObjectKind::Function,
        };
        if let Some(id) = int(row, 0, what)? {
            by_id.insert(id, catalog.objects.len());
        }
        let mut object = object(required(row, 1, what)?, required(row, 2, what)?, kind);
        object.owner = text(row, 4, what)?;
        object.parent = text(row, 5, what)?;
        catalog.objects.push(object);
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        if let Some(id) = int(row, 0, what)? {
            by_id.insert(id, catalog.objects.len());
        }
        catalog.objects.push(object(
            String::new(),
            required(row, 1, what)?,
            ObjectKind::DatabaseTrigger,
        ));
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let Some(&at) = int(row, 0, what)?.and_then(|id| by_id.get(&id)) else {
            continue;
        };
        let object = &mut catalog.objects[at];
        object.definition = text(row, 1, what)?;
        object.execute_as = text(row, 2, what)?;
        object.definition_hash = crate::tsql::hash_hex(row, 3);
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        if let Some(&at) = int(row, 0, what)?.and_then(|id| by_id.get(&id)) {
            catalog.objects[at].assembly = text(row, 1, what)?;
        }
    }

    let (rows, what) = next();
    match rows {
        None => {
            catalog.signatures_unreadable = Some("module signatures (sys.crypt_properties) could not be read".into())
        }
        Some(rows) => {
            for row in &rows {
                let signer = required(row, 1, what)?;
                match int(row, 0, what)? {
                    Some(id) => {
                        if let Some(&at) = by_id.get(&id) {
                            catalog.objects[at].signed_by.push(signer);
                        }
                    }
                    None if signer == "signers" => {
                        catalog.signatures_unreadable = Some(format!(
                            "{} has certificates or asymmetric keys but no signature catalog \
                             (sys.crypt_properties)",
                            catalog.engine.product
                        ));
                    }
                    None => {}
                }
            }
        }
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let mut synonym = object(required(row, 0, what)?, required(row, 1, what)?, ObjectKind::Synonym);
        synonym.owner = text(row, 2, what)?;
        synonym.definition = text(row, 3, what)?;
        catalog.objects.push(synonym);
    }

    let (rows, what) = next();
    catalog.dependencies = match rows {
        None => None,
        Some(rows) => Some(
            rows.iter()
                .map(|row| {
                    Ok(Dependency {
                        referencing: required(row, 0, what)?,
                        referenced: required(row, 1, what)?,
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
    };

    let (rows, what) = next();
    catalog.deployed = match rows {
        Some(rows) if rows.iter().all(|r| matches!(int(r, 0, what), Ok(Some(1)))) => Some(
            rows.iter()
                .map(|row| {
                    Ok(DeployedProcedure {
                        name: required(row, 1, what)?,
                        definition_hash: crate::tsql::hash_hex(row, 2),
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
        _ => None,
    };

    let (rows, what) = next();
    catalog.server = match rows {
        Some(rows) if rows.iter().any(|r| is_visible_marker(r, what)) => Some(server(&rows, what, &catalog)?),
        _ => None,
    };

    let (rows, what) = next();
    catalog.server_settings = match rows.as_deref().and_then(|r| r.first()) {
        Some(row) => Some(ServerSettings {
            cross_db_ownership_chaining: int(row, 0, what)? == Some(1),
        }),
        None => None,
    };

    let (rows, what) = next();
    catalog.trustworthy_databases = match rows {
        None => None,
        Some(rows) => Some(trustworthy(&rows, what)?),
    };

    let (rows, what) = next();
    // Asked of Babelfish only; elsewhere the query answers no rows.
    if !catalog.engine.chains_ownership
        && let Some(rows) = rows
    {
        let mut definer = Vec::new();
        for row in &rows {
            if let Some(name) = text(row, 0, what)? {
                definer.push(name.to_lowercase());
            }
        }
        catalog.engine.security_definer = Some(definer);
    }

    let (rows, what) = next();
    catalog.database_identity = match rows.as_deref().map(|r| r.first()) {
        Some(Some(row)) => Some(IdentityReading {
            recorded: uuid(row, 0, what)?,
            current: uuid(row, 1, what)?,
        }),
        // A query that answered no row read nothing.
        Some(None) | None => None,
    };

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let (Some(id), Some(number)) = (int(row, 0, what)?, int(row, 1, what)?) else {
            continue;
        };
        let Some(&at) = by_id.get(&id) else { continue };
        let base = &catalog.objects[at];
        let mut numbered = object(
            base.schema.clone(),
            format!("{};{number}", base.name),
            ObjectKind::Procedure,
        );
        numbered.owner = base.owner.clone();
        numbered.definition = text(row, 2, what)?;
        catalog.objects.push(numbered);
    }

    let (rows, what) = next();
    if let (Some(server), Some(rows)) = (catalog.server.as_mut(), rows) {
        let mut triggers = Some(Vec::new());
        for row in &rows {
            match (text(row, 0, what)?.as_deref(), triggers.as_mut()) {
                (Some("trigger"), Some(list)) => list.push(ServerTrigger {
                    name: required(row, 1, what)?,
                    definition: text(row, 2, what)?,
                }),
                _ => triggers = None,
            }
        }
        server.triggers = triggers;
    }

    let (rows, what) = next();
    catalog.fence_table_features = match rows {
        Some(rows) => fence_table_features(&rows, what)?,
        None => None,
    };

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let (Some(class), Some(id), Some(name)) = (int(row, 0, what)?, int(row, 1, what)?, text(row, 2, what)?) else {
            continue;
        };
        let key = if class == 25 { "CERTIFICATE" } else { "ASYMMETRIC KEY" };
        for p in &mut catalog.permissions {
            if let Securable::Key { key: k, name: n } = &mut p.on
                && k == key
                && *n == format!("#{id}")
            {
                *n = name.clone();
            }
        }
    }

    let (rows, what) = next();
    (catalog.job_steps, catalog.job_editors) = match rows {
        Some(rows) => job_steps(&rows, what)?,
        None => (None, None),
    };

    let (rows, what) = next();
    catalog.linked_servers = match rows {
        Some(rows) => linked_servers(&rows, what)?,
        None => None,
    };

    let (rows, what) = next();
    catalog.activated_queues = match rows {
        Some(rows) => Some(activated_queues(&rows, what)?),
        None => None,
    };
    Ok(catalog)
}

/// The job steps, or `None` at the marker row of an engine without an Agent
/// catalog; and who may rewrite any job, or `None` without the row saying
/// msdb's principals were seen in full.
type JobRows = (Option<Vec<JobStep>>, Option<Vec<JobEditor>>);

fn job_steps(rows: &[Row], what: &'static str) -> Result<JobRows, AuditError> {
    let mut steps = Vec::new();
    let mut editors = Vec::new();
    let mut visible = false;
    for row in rows {
        match text(row, 0, what)?.as_deref() {
            Some("step") => steps.push(JobStep {
                job: required(row, 1, what)?,
                step_id: int(row, 2, what)?.unwrap_or_default(),
                step: text(row, 3, what)?.unwrap_or_default(),
                owner: text(row, 4, what)?,
                command: text(row, 5, what)?,
                database: text(row, 6, what)?,
                run_as_user: text(row, 7, what)?,
            }),
            Some("editors visible") => visible = true,
            // Azure SQL Database: no Agent, no msdb jobs at all.
            Some("no agent") => return Ok((Some(Vec::new()), Some(Vec::new()))),
            Some("editor") => editors.push(JobEditor {
                user: required(row, 1, what)?,
                via_role: int(row, 2, what)? == Some(1),
                via: required(row, 3, what)?,
                login: text(row, 4, what)?,
                holder: required(row, 6, what)?,
            }),
            _ => return Ok((None, None)),
        }
    }
    Ok((Some(steps), visible.then_some(editors)))
}

/// The linked servers, or `None` without the row saying the checking login
/// sees them all.
fn linked_servers(rows: &[Row], what: &'static str) -> Result<Option<LinkedServers>, AuditError> {
    let mut linked = LinkedServers::default();
    let mut visible = false;
    let mut logins = Vec::new();
    for row in rows {
        let name = text(row, 1, what)?;
        match (text(row, 0, what)?.as_deref(), name) {
            (Some("visible"), _) => visible = true,
            (Some("this"), Some(name)) if !name.is_empty() => linked.this_server.push(name),
            (Some("server"), Some(name)) => linked.servers.push(LinkedServer {
                name,
                data_source: text(row, 2, what)?.filter(|d| !d.is_empty()),
                logins: Vec::new(),
            }),
            (Some("login"), Some(name)) => {
                let login = LinkedLogin {
                    local_login: text(row, 2, what)?,
                    uses_self_credential: int(row, 3, what)? == Some(1),
                    remote_login: text(row, 4, what)?,
                };
                logins.push((name, login));
            }
            _ => {}
        }
    }
    // A UNION ALL keeps no order: mappings are matched once every server is in.
    for (name, login) in logins {
        if let Some(s) = linked.servers.iter_mut().find(|s| s.name == name) {
            s.logins.push(login);
        }
    }
    Ok(visible.then_some(linked))
}

fn activated_queues(rows: &[Row], what: &'static str) -> Result<Vec<ServiceQueue>, AuditError> {
    let mut queues: Vec<ServiceQueue> = Vec::new();
    for row in rows {
        if text(row, 0, what)?.as_deref() == Some("queue") {
            queues.push(ServiceQueue {
                name: required(row, 1, what)?,
                owner: text(row, 2, what)?,
                procedure: text(row, 3, what)?.unwrap_or_default(),
                execute_as: text(row, 4, what)?,
                senders: Vec::new(),
            });
        }
    }
    // A UNION ALL keeps no order: senders are matched once every queue is in.
    for row in rows {
        if text(row, 0, what)?.as_deref() != Some("sender") {
            continue;
        }
        let name = required(row, 1, what)?;
        if let (Some(q), Some(sender)) = (queues.iter_mut().find(|q| q.name == name), text(row, 2, what)?) {
            q.senders.push(sender);
        }
    }
    Ok(queues)
}

/// The features on the fence tables, or `None` at the marker row of an
/// engine without the catalog to show them.
fn fence_table_features(rows: &[Row], what: &'static str) -> Result<Option<Vec<FenceTableFeature>>, AuditError> {
    let mut features = Vec::new();
    for row in rows {
        let table = text(row, 1, what)?.unwrap_or_default();
        let other = text(row, 2, what)?.unwrap_or_default();
        let feature = match text(row, 0, what)?.as_deref() {
            Some("versioned") => TableFeature::SystemVersioned { history: other },
            Some("cdc") => TableFeature::ChangeDataCapture,
            Some("replicated") => TableFeature::Replicated,
            Some("policy") => TableFeature::SecurityPolicy { policy: other },
            _ => return Ok(None),
        };
        features.push(FenceTableFeature { table, feature });
    }
    Ok(Some(features))
}

fn object(schema: String, name: String, kind: ObjectKind) -> Object {
    Object {
        schema,
        name,
        kind,
        owner: None,
        parent: None,
        definition: None,
        definition_hash: None,
        execute_as: None,
        signed_by: Vec::new(),
        assembly: None,
    }
}

fn permission(row: &Row, what: &'static str) -> Result<Option<Permission>, AuditError> {
    let on = match int(row, 3, what)? {
        Some(0) => Securable::Database,
        Some(3) => Securable::Schema {
            schema: required(row, 4, what)?,
        },
        Some(1) => Securable::Object {
            schema: required(row, 4, what)?,
            name: required(row, 5, what)?,
            column: text(row, 6, what)?,
        },
        Some(4) => Securable::Principal {
            name: required(row, 5, what)?,
        },
        Some(class @ 24..=26) => Securable::Key {
            key: match class {
                24 => "SYMMETRIC KEY",
                25 => "CERTIFICATE",
                _ => "ASYMMETRIC KEY",
            }
            .into(),
            // The name is filled in from the key catalog; the id until then.
            name: format!("#{}", int(row, 8, what)?.unwrap_or_default()),
        },
        // Kept, not dropped: a permission no rule weighs is still listed.
        _ => Securable::Other {
            class_desc: text(row, 7, what)?.unwrap_or_default(),
            name: None,
        },
    };
    let state = match text(row, 2, what)?.as_deref() {
        Some("D") => PermissionState::Deny,
        Some("W") => PermissionState::GrantWithGrantOption,
        _ => PermissionState::Grant,
    };
    Ok(Some(Permission {
        grantee: required(row, 0, what)?,
        permission: required(row, 1, what)?,
        state,
        on,
    }))
}
