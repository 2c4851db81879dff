//! Every right a principal holds on a securable of the database, wherever it
//! comes from: a grant, ownership, a fixed role's documented rights, being
//! dbo. Each says how it is held and what removes it, so an edge built on it
//! can.

use super::super::catalog::{Permission, PermissionState, Securable};
use super::super::rules::Context;
use super::bound::note;
use super::right::Right;
use super::{denies, held, leaving};
use crate::tsql::quote_name;

/// Every right of the catalog, in a stable order: by holder, grants before
/// ownership before fixed roles' rights, then by permission.
pub(crate) fn all(ctx: &Context) -> Vec<Right> {
    let mut rights = held::held(ctx);
    taken_schemas(ctx, &mut rights);
    sort(&mut rights);
    rights
}

/// By holder, grants before ownership before fixed roles' rights, then by
/// permission.
fn sort(rights: &mut [Right]) {
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
        // A DENY of the taking the holder cannot drop its way out of binds
        // every session of the holder but one of a member that can: that
        // member takes the schema itself.
        let takers: Vec<(String, String)> = if bound.refused {
            leaving::members_getting_past(ctx, &right.holder, &bound.cutting)
                .into_iter()
                .map(|(member, left)| (member, note(&left)))
                .collect()
        } else {
            // The holder drops its own way out first: the path names it.
            vec![(right.holder.clone(), note(&bound.left))]
        };
        for (taker, left) in takers {
            taken.push(Right {
                holder: taker.clone(),
                permission: Permission {
                    grantee: taker.clone(),
                    permission: "CONTROL".into(),
                    state: PermissionState::Grant,
                    on: p.on.clone(),
                },
                held: Some(format!(
                    "TAKE OWNERSHIP on SCHEMA::{schema}{left}, so ALTER AUTHORIZATION ON SCHEMA::{} TO {} makes \
                     it the owner, who holds CONTROL on it",
                    quote_name(schema),
                    quote_name(&taker)
                )),
                evidence: right.evidence.clone(),
                cut: right.cut.clone(),
                plain_grant: false,
                login: right.login,
                // A DENY of the taking made to some member of a holding role
                // is not followed past the taking: the member stays named.
                undeniable: bound.denied.is_empty(),
                taken: true,
            });
        }
    }
    rights.extend(taken);
}
