//! Fixture catalogs for the audit rules: a clean v1 deployment, built from
//! the shipped procedure texts, and the small T-SQL-shaped edits that break it.

use fencepost::audit::{
    Catalog, DatabaseSettings, Dependency, DeployedProcedure, Engine, LoginKind, Membership, Object, ObjectKind,
    OtherDatabase, OtherDatabaseUser, Permission, PermissionState, Principal, PrincipalKind, Schema, Securable,
    ServerFacts, ServerPermission, ServerSettings, Visibility,
};
use sha2::{Digest, Sha256};

/// The `(file, text)` pairs of one shipped folder, by file name.
fn shipped_folder(folder: &str) -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{folder}/: {e}"))
        .map(|e| {
            let path = e.expect("entry").path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            (file, std::fs::read_to_string(&path).expect("file text"))
        })
        .collect();
    files.sort();
    files
}

/// The shipped migrations, as `migrations/` holds them.
pub fn shipped_migrations() -> Vec<(String, String)> {
    shipped_folder("migrations")
}

/// The shipped procedures, as `procedures/` holds them.
pub fn shipped_procedures() -> Vec<(String, String)> {
    shipped_folder("procedures")
}

/// The shipped permission scripts, as `permissions/` holds them.
pub fn shipped_permissions() -> Vec<(String, String)> {
    shipped_folder("permissions")
}

/// The shipped procedures and permission scripts, as `check --offline`
/// reads them.
pub fn shipped_sources() -> fencepost::audit::ShippedScripts {
    let source = |(file, text): (String, String)| fencepost::audit::Source::new(file, text);
    fencepost::audit::ShippedScripts {
        procedures: shipped_procedures().into_iter().map(source).collect(),
        permissions: shipped_permissions().into_iter().map(source).collect(),
    }
}

/// What SQL Server's `HASHBYTES('SHA2_256', nvarchar)` gives: SHA-256 over
/// UTF-16LE, as upper-case hex.
pub fn server_hash(definition: &str) -> String {
    let bytes: Vec<u8> = definition.encode_utf16().flat_map(u16::to_le_bytes).collect();
    hex::encode_upper(Sha256::digest(&bytes))
}

pub fn role(name: &str) -> Principal {
    Principal::new(name, PrincipalKind::Role)
}

pub fn user(name: &str, login: Option<&str>) -> Principal {
    Principal {
        login: login.map(String::from),
        login_kind: login.map(|_| LoginKind::Sql),
        ..Principal::new(name, PrincipalKind::User)
    }
}

pub fn member(role: &str, member: &str) -> Membership {
    Membership {
        role: role.into(),
        member: member.into(),
    }
}

pub fn grant(grantee: &str, permission: &str, on: Securable) -> Permission {
    Permission {
        grantee: grantee.into(),
        permission: permission.into(),
        state: PermissionState::Grant,
        on,
    }
}

pub fn object(schema: &str, name: &str) -> Securable {
    Securable::Object {
        schema: schema.into(),
        name: name.into(),
        column: None,
    }
}

pub fn schema(name: &str) -> Securable {
    Securable::Schema { schema: name.into() }
}

pub fn module(schema: &str, name: &str, kind: ObjectKind, definition: &str) -> Object {
    Object {
        schema: schema.into(),
        name: name.into(),
        kind,
        owner: None,
        parent: None,
        definition: Some(definition.into()),
        definition_hash: None,
        execute_as: None,
        execute_as_user: false,
        signed_by: Vec::new(),
        counter_signed_by: Vec::new(),
        assembly: None,
        disabled: false,
    }
}

/// A server-wide permission granted to a login or server role.
pub fn server_grant(grantee: &str, permission: &str) -> ServerPermission {
    ServerPermission {
        grantee: grantee.into(),
        permission: permission.into(),
        on_login: None,
    }
}

/// A v1 deployment as `fencepost migrate` leaves it on SQL Server, with a
/// service user in each fence role, a DBA in db_owner and unrelated objects
/// that must not trip anything.
pub fn clean() -> Catalog {
    let mut c = Catalog {
        database: "orders".into(),
        engine: Engine::default(),
        // A deploy login in db_owner on SQL Server 2022 sees everything.
        visibility: Some(Visibility {
            sysadmin: false,
            view_definition: Some(true),
            view_security_definition: Some(true),
        }),
        settings: Some(DatabaseSettings {
            trustworthy: false,
            db_chaining: false,
        }),
        server_settings: Some(ServerSettings {
            cross_db_ownership_chaining: false,
            common_criteria_compliance: Some(false),
        }),
        // Recorded by the deploy, and not restored since.
        database_identity: Some(fencepost::audit::IdentityReading {
            recorded: Some(uuid::Uuid::from_u128(1)),
            current: Some(uuid::Uuid::from_u128(1)),
        }),
        ..Catalog::default()
    };
    c.principals = vec![
        user("dbo", Some("sa")),
        user("guest", None),
        role("public"),
        role("db_owner"),
        role("db_datawriter"),
        role("db_datareader"),
        role("db_ddladmin"),
        role("fence_service"),
        role("fence_reader"),
        role("fence_operator"),
        role("fence_recovery"),
        user("orders_svc", Some("orders_svc")),
        user("dashboard", Some("dashboard")),
        user("oncall", Some("oncall")),
        user("deployer", Some("deployer")),
        user("reporting", Some("reporting")),
    ];
    c.memberships = vec![
        member("db_owner", "dbo"),
        member("db_owner", "deployer"),
        member("db_datareader", "reporting"),
        member("fence_service", "orders_svc"),
        member("fence_reader", "dashboard"),
        member("fence_operator", "oncall"),
    ];
    // The EXECUTE grants, as the shipped permission scripts make them: a
    // grant added there, or taken away, is one here.
    c.permissions
        .extend(fencepost::audit::shipped_grants(&shipped_sources()));
    for r in ["fence_service", "fence_reader", "fence_operator", "fence_recovery"] {
        for p in [
            "SELECT",
            "INSERT",
            "UPDATE",
            "DELETE",
            "ALTER",
            "CONTROL",
            "TAKE OWNERSHIP",
        ] {
            c.permissions.push(Permission {
                state: PermissionState::Deny,
                ..grant(r, p, schema("fence"))
            });
        }
    }
    for u in ["dbo", "orders_svc", "dashboard", "oncall", "deployer", "reporting"] {
        c.permissions.push(grant(u, "CONNECT", Securable::Database));
    }
    c.permissions
        .push(grant("reporting", "SELECT", object("dbo", "Orders")));
    c.permissions
        .push(grant("orders_svc", "UPDATE", object("dbo", "Orders")));
    c.schemas = ["dbo", "fence", "fence_api", "fence_admin", "guest"]
        .iter()
        .map(|s| Schema {
            name: s.to_string(),
            owner: if *s == "guest" { "guest" } else { "dbo" }.into(),
        })
        .collect();
    for t in [
        "Resource",
        "PublishedOperation",
        "Tenure",
        "Recovery",
        "Anchor",
        "DatabaseIdentity",
        "Deployment",
        "DeployedProcedure",
        "SchemaHistory",
    ] {
        c.objects.push(Object {
            kind: ObjectKind::Table,
            definition: None,
            ..module("fence", t, ObjectKind::Table, "")
        });
    }
    c.objects.push(Object {
        kind: ObjectKind::Table,
        definition: None,
        ..module("dbo", "Orders", ObjectKind::Table, "")
    });
    let mut journal = Vec::new();
    let mut dependencies = Vec::new();
    for (file, text) in shipped_procedures() {
        let name = file.trim_end_matches(".sql");
        let (s, n) = name.split_once('.').unwrap();
        let mut proc = module(s, n, ObjectKind::Procedure, &text);
        proc.definition_hash = Some(server_hash(&text));
        journal.push(DeployedProcedure {
            name: name.into(),
            definition_hash: Some(server_hash(&text)),
        });
        dependencies.push(Dependency {
            referencing: name.into(),
            referenced: "fence.Resource".into(),
        });
        c.objects.push(proc);
    }
    // Mentions the fence only in a comment, and writes only its own table.
    c.objects.push(module(
        "dbo",
        "ShipOrder",
        ObjectKind::Procedure,
        "-- Never touches fence.Resource: leases go through fence_api.\n\
         CREATE PROCEDURE dbo.ShipOrder @Id int AS UPDATE dbo.Orders SET Shipped = 1 WHERE Id = @Id;",
    ));
    c.dependencies = Some(dependencies);
    c.deployed = Some(journal);
    c.server = Some(ServerFacts {
        role_members: vec![member("sysadmin", "sa"), member("sysadmin", "deployer")],
        // The fixed server roles, as sys.server_principals lists them.
        roles: [
            "public",
            "sysadmin",
            "securityadmin",
            "serveradmin",
            "setupadmin",
            "processadmin",
            "diskadmin",
            "dbcreator",
            "bulkadmin",
        ]
        .map(String::from)
        .to_vec(),
        // The fixed roles have no owner to list.
        role_owners: Vec::new(),
        permissions: Vec::new(),
        denies: Vec::new(),
        availability_groups: Vec::new(),
        permissions_unreadable: None,
        group_logins: Vec::new(),
        // No server trigger.
        triggers: Some(Vec::new()),
    });
    // No history table, change capture, publication or security policy.
    c.fence_table_features = Some(Vec::new());
    // No Agent job step, linked server or activated queue.
    c.job_steps = Some(Vec::new());
    // Only sysadmins may write msdb's job tables.
    c.job_editors = Some(Vec::new());
    // No Agent proxy.
    c.agent_proxies = Some(Vec::new());
    c.linked_servers = Some(fencepost::audit::LinkedServers {
        this_server: vec!["SQL01".into()],
        servers: Vec::new(),
    });
    c.activated_queues = Some(Vec::new());
    // No expression on a table, no certificate or key, and no way out of
    // T-SQL.
    c.table_expressions = Some(Vec::new());
    // The one key the migrations make: PublishedOperation to Resource, NO
    // ACTION both ways.
    c.foreign_keys = Some(vec![fencepost::audit::ForeignKey {
        name: "FK_PublishedOperation_Resource".into(),
        table: "fence.PublishedOperation".into(),
        referenced: "fence.Resource".into(),
        referenced_columns: vec!["ResourceKey".into()],
        on_delete: fencepost::audit::ReferentialAction::NoAction,
        on_update: fencepost::audit::ReferentialAction::NoAction,
    }]);
    c.signing_keys = Some(Vec::new());
    c.assemblies = Some(Vec::new());
    c.outside_tsql = Some(fencepost::audit::OutsideTsql::default());
    // msdb is TRUSTWORTHY and owned by sa on every server; no service is
    // db_owner there.
    c.trustworthy_databases = Some(vec![OtherDatabase {
        name: "msdb".into(),
        owner: Some("sa".into()),
        db_owners: Some(vec![OtherDatabaseUser {
            user: "dbo".into(),
            login: Some("sa".into()),
            via: "dbo".into(),
            right: "db_owner".into(),
        }]),
    }]);
    c
}

/// Takes away the DENYs the deploy makes to the fence roles on the fence
/// schema, for a layout that tests a grant those DENYs would refuse.
pub fn without_shipped_denies(c: &mut Catalog) {
    c.permissions.retain(|p| {
        !(p.state == PermissionState::Deny
            && matches!(&p.on, Securable::Schema { schema } if schema == "fence")
            && p.grantee.starts_with("fence_"))
    });
}

/// Shorthand for editing one object of a catalog in place.
pub fn object_mut<'c>(c: &'c mut Catalog, qualified: &str) -> &'c mut Object {
    c.objects
        .iter_mut()
        .find(|o| o.is(qualified))
        .unwrap_or_else(|| panic!("{qualified} in fixture"))
}

/// The report of `c` under the default policy.
pub fn check(c: &Catalog) -> fencepost::audit::Report {
    fencepost::audit::evaluate(c, &fencepost::audit::Policy::default())
}

/// The findings of `report`, asserting they all belong to `rule`, that
/// nothing is left unverified and that the exit status is 1: an attack must
/// be named by its rule and must not spill into others.
pub fn only(report: &fencepost::audit::Report, rule: fencepost::audit::Rule) -> Vec<fencepost::audit::Finding> {
    let others: Vec<_> = report.findings.iter().filter(|f| f.rule != rule).collect();
    assert!(others.is_empty(), "unexpected findings of other rules: {others:#?}");
    assert!(
        report.cannot_verify.is_empty(),
        "unexpected cannot verify: {:#?}",
        report.cannot_verify
    );
    let found: Vec<_> = report.findings_of(rule).cloned().collect();
    assert!(!found.is_empty(), "{} found nothing", rule.id());
    assert_eq!(report.exit_code(), 1);
    found
}

/// The ids of the rules `report` could not verify, in order.
pub fn unverified(report: &fencepost::audit::Report) -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = report.cannot_verify.iter().map(|c| c.rule.id()).collect();
    ids.dedup();
    ids
}

/// The server facts of a fixture catalog, to edit.
pub fn server_facts(c: &mut Catalog) -> &mut ServerFacts {
    c.server.as_mut().expect("the fixture shows server facts")
}

/// A server permission on one login (`GRANT ALTER ON LOGIN::etl`).
pub fn on_login(grantee: &str, permission: &str, login: &str) -> ServerPermission {
    ServerPermission {
        on_login: Some(login.into()),
        ..server_grant(grantee, permission)
    }
}

/// The FP027 findings of `c` naming `principal` (`etl`, `login etl`).
pub fn reaching(c: &Catalog, principal: &str) -> Vec<fencepost::audit::Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| f.rule == fencepost::audit::Rule::ReachesFence && f.principal.as_deref() == Some(principal))
        .collect()
}

/// What each step of a finding's path does, in order.
pub fn step_texts(f: &fencepost::audit::Finding) -> Vec<&str> {
    f.path.iter().map(|s| s.step.as_str()).collect()
}
