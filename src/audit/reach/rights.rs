//! Every right a principal holds on a securable of the database, wherever it
//! comes from: a grant, ownership, a fixed role's documented rights, being
//! dbo. Each says how it is held and what removes it, so an edge built on it
//! can.

use super::super::catalog::{Permission, PermissionState, PrincipalKind, Securable};
use super::super::rules::Context;
use super::right::Right;
use super::{denies, fixed_roles, server_inherited};
use crate::tsql::{quote_name, quote_qualified};

/// Every right of the catalog, in a stable order: by holder, grants before
/// ownership before fixed roles' rights, then by permission.
pub(crate) fn all(ctx: &Context) -> Vec<Right> {
    let mut rights = Vec::new();
    for p in ctx.grants() {
        let option = if p.state == PermissionState::GrantWithGrantOption {
            " WITH GRANT OPTION"
        } else {
            ""
        };
        rights.push(Right {
            holder: p.grantee.clone(),
            permission: p.clone(),
            held: None,
            evidence: format!(
                "sys.database_permissions: GRANT {} ON {} TO {}{option}",
                p.permission.to_uppercase(),
                ctx.describe(&p.on),
                p.grantee
            ),
            cut: ctx.revoke(p),
            plain_grant: p.state == PermissionState::Grant,
            login: false,
            undeniable: false,
            taken: false,
        });
    }
    owners(ctx, &mut rights);
    taken_schemas(ctx, &mut rights);
    fixed_roles::rights(ctx, &mut rights);
    server_inherited::rights(ctx, &mut rights);
    // dbo is the database's owner: no permission check applies to it.
    if ctx.catalog.principal("dbo").is_some() {
        rights.push(owned(
            "dbo",
            Securable::Database,
            "dbo is the database owner, whom no permission check applies to",
            "sys.databases.owner_sid: dbo is the database owner".into(),
            "ALTER AUTHORIZATION ON DATABASE::<db> TO <a login trusted to own it>;".into(),
        ));
    }
    let rank = |r: &Right| -> (String, u8, usize, String) {
        let source = if r.plain_grant || r.permission.state == PermissionState::GrantWithGrantOption && r.held.is_none()
        {
            0
        } else if r.evidence.starts_with("sys.") {
            1
        } else {
            2
        };
        (
            r.holder.to_lowercase(),
            source,
            PREFERENCE
                .iter()
                .position(|p| p.eq_ignore_ascii_case(&r.permission.permission))
                .unwrap_or(PREFERENCE.len()),
            format!("{:?}", r.permission.on),
        )
    };
    rights.sort_by_key(rank);
    rights
}

/// The order a path names rights in when several reach the same goal.
const PREFERENCE: [&str; 8] = [
    "CONTROL",
    "UPDATE",
    "INSERT",
    "DELETE",
    "ALTER",
    "TAKE OWNERSHIP",
    "IMPERSONATE",
    "EXECUTE",
];

fn owned(holder: &str, on: Securable, held: &str, evidence: String, cut: String) -> Right {
    Right {
        holder: holder.to_string(),
        permission: Permission {
            grantee: holder.to_string(),
            permission: "CONTROL".into(),
            state: PermissionState::Grant,
            on,
        },
        held: Some(held.to_string()),
        evidence,
        cut,
        plain_grant: false,
        login: false,
        // An owner passes every permission check on what it owns.
        undeniable: true,
        taken: false,
    }
}

/// Owning a schema, an object, an assembly or a role is CONTROL on it.
fn owners(ctx: &Context, rights: &mut Vec<Right>) {
    for s in &ctx.catalog.schemas {
        rights.push(owned(
            &s.owner,
            Securable::Schema { schema: s.name.clone() },
            &format!("{} owns SCHEMA::{}", s.owner, s.name),
            format!("sys.schemas: {} is owned by {}", s.name, s.owner),
            format!("ALTER AUTHORIZATION ON SCHEMA::{} TO [dbo];", quote_name(&s.name)),
        ));
    }
    for o in &ctx.catalog.objects {
        let Some(owner) = o.owner.as_deref() else { continue };
        if o.schema.is_empty() {
            continue;
        }
        rights.push(owned(
            owner,
            Securable::Object {
                schema: o.schema.clone(),
                name: o.name.clone(),
                column: None,
            },
            &format!("{owner} owns {}", o.qualified_name()),
            format!("sys.objects: {} has principal_id {owner}", o.qualified_name()),
            format!(
                "ALTER AUTHORIZATION ON OBJECT::{} TO SCHEMA OWNER;",
                quote_qualified(&o.schema, &o.name)
            ),
        ));
    }
    for a in ctx.catalog.assemblies.iter().flatten() {
        let Some(owner) = a.owner.as_deref() else { continue };
        rights.push(owned(
            owner,
            Securable::Other {
                class_desc: "ASSEMBLY".into(),
                name: Some(a.name.clone()),
            },
            &format!("{owner} owns ASSEMBLY::{}", a.name),
            format!("sys.assemblies: {} is owned by {owner}", a.name),
            format!("ALTER AUTHORIZATION ON ASSEMBLY::{} TO [dbo];", quote_name(&a.name)),
        ));
    }
    for r in &ctx.catalog.principals {
        let Some(owner) = r.owner.as_deref() else { continue };
        if !matches!(r.kind, PrincipalKind::Role | PrincipalKind::ApplicationRole)
            || owner.eq_ignore_ascii_case(&r.name)
        {
            continue;
        }
        let class = ctx.principal_class(&r.name);
        rights.push(owned(
            owner,
            Securable::Principal { name: r.name.clone() },
            &format!("{owner} owns {class}::{}", r.name),
            format!("sys.database_principals: {} has owning_principal_id {owner}", r.name),
            format!("ALTER AUTHORIZATION ON {class}::{} TO [dbo];", quote_name(&r.name)),
        ));
    }
}

/// Schemas whose owner SQL Server does not let anyone change ("ALTER
/// AUTHORIZATION": sys, dbo and INFORMATION_SCHEMA).
const FIXED_OWNER_SCHEMAS: [&str; 3] = ["dbo", "sys", "INFORMATION_SCHEMA"];

/// TAKE OWNERSHIP on a schema is owning it once its holder runs ALTER
/// AUTHORIZATION ON SCHEMA::s TO itself, and an owner holds CONTROL on the
/// schema, which is every permission on every object in it. The hierarchy
/// gives TAKE OWNERSHIP on a schema nothing on its objects; the act does.
/// A DENY of the taking (TAKE OWNERSHIP or CONTROL on the schema or the
/// database) refuses it; once taken, no DENY binds the new owner.
fn taken_schemas(ctx: &Context, rights: &mut Vec<Right>) {
    let mut taken = Vec::new();
    for right in rights.iter() {
        let p = &right.permission;
        let Securable::Schema { schema } = &p.on else { continue };
        if !ctx.implies(p, "SCHEMA", "TAKE OWNERSHIP")
            || ctx.implies(p, "SCHEMA", "CONTROL")
            || FIXED_OWNER_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(schema))
            || ctx
                .catalog
                .schema_owner(schema)
                .is_some_and(|o| o.eq_ignore_ascii_case(&right.holder))
        {
            continue;
        }
        let Some(bound) = denies::allows(ctx, right, &p.on, "TAKE OWNERSHIP") else {
            continue;
        };
        taken.push(Right {
            holder: right.holder.clone(),
            permission: Permission {
                grantee: right.holder.clone(),
                permission: "CONTROL".into(),
                state: PermissionState::Grant,
                on: p.on.clone(),
            },
            held: Some(format!(
                "TAKE OWNERSHIP on SCHEMA::{schema}, so ALTER AUTHORIZATION ON SCHEMA::{} TO {} makes it the \
                 owner, who holds CONTROL on it",
                quote_name(schema),
                quote_name(&right.holder)
            )),
            evidence: right.evidence.clone(),
            cut: right.cut.clone(),
            plain_grant: false,
            login: right.login,
            // A DENY of the taking made to some member of a holding role
            // is not followed past the taking: the member stays named.
            undeniable: bound.is_empty(),
            taken: true,
        });
    }
    rights.extend(taken);
}
