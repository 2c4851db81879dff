//! The rights principals hold as the catalog stands, before any act of
//! theirs: grants, ownership (CONTROL on what one owns), the fixed roles'
//! documented rights, server principals' rights here, and dbo's.

use super::super::catalog::{Permission, PermissionState, PrincipalKind, Securable};
use super::super::rules::Context;
use super::right::Right;
use super::{fixed_roles, server_inherited};
use crate::tsql::{quote_name, quote_qualified};

/// Every right held as it stands, before any act (taking a schema): what a
/// principal may already alter, which [`super::leaving`] asks without
/// judging DENYs of its own; [`super::rights::all`] adds the rest.
pub(super) fn held(ctx: &Context) -> Vec<Right> {
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
    fixed_roles::rights(ctx, &mut rights);
    server_inherited::rights(ctx, &mut rights);
    // dbo is the database's owner: no permission check applies to it.
    if ctx.principal("dbo").is_some() {
        rights.push(owned(
            "dbo",
            Securable::Database,
            "dbo is the database owner, whom no permission check applies to",
            "sys.databases.owner_sid: dbo is the database owner".into(),
            "ALTER AUTHORIZATION ON DATABASE::<db> TO <a login trusted to own it>;".into(),
        ));
    }
    rights
}

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
