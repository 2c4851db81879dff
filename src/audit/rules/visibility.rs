//! Whether the catalog shows the checking login everything. Catalog views
//! leave out, without a word, the rows of securables the login has no right
//! on: an empty answer from a login that cannot see proves nothing, so no
//! rule may pass on it.

use super::super::catalog::Securable;
use super::Context;

/// Why no rule can pass on this catalog, if so: the login's own view of the
/// database is partial, or a named service is not in it.
pub(super) fn blind(ctx: &Context) -> Vec<String> {
    let mut reasons = Vec::new();
    match ctx.catalog.visibility {
        None => reasons.push(
            "the checking login's own database permissions (fn_my_permissions) could not be read, so whether the \
             catalog hides rows from it cannot be told"
                .to_string(),
        ),
        Some(v) if v.sysadmin => {}
        Some(v) => match v.view_definition {
            None => reasons.push(
                "this engine cannot list the checking login's database permissions (it has no \
                 fn_my_permissions), and the login is not sysadmin, the one standing accepted instead, so whether \
                 the catalog hides rows from it cannot be told"
                    .to_string(),
            ),
            Some(view_definition) => {
                let mut lacking = Vec::new();
                if !view_definition {
                    lacking.push("VIEW DEFINITION");
                }
                if v.view_security_definition == Some(false) {
                    lacking.push("VIEW SECURITY DEFINITION");
                }
                if !lacking.is_empty() {
                    let lacking = lacking.join(" and ");
                    reasons.push(format!(
                        "the checking login lacks {lacking} on the database (fn_my_permissions), so the catalog \
                         leaves out what it has no right on; check with a login that holds {lacking} on the \
                         database (db_owner and CONTROL include them) or is sysadmin"
                    ));
                }
            }
        },
    }
    let dbo_shows = ctx
        .catalog
        .memberships
        .iter()
        .any(|m| m.role.eq_ignore_ascii_case("db_owner") && m.member.eq_ignore_ascii_case("dbo"));
    if !dbo_shows {
        reasons.push(
            "role memberships (sys.database_role_members) do not show dbo in db_owner, a row every database has, \
             so memberships are hidden from the checking login"
                .to_string(),
        );
    }
    for name in ctx.unresolved() {
        reasons.push(format!(
            "the service principal {name} is neither a principal of this database nor the login of one (matched \
             by SID), so what it can reach cannot be checked"
        ));
    }
    reasons
}

/// Why the permission catalog cannot be trusted to be complete, if so. The
/// deploy's own EXECUTE grants are the calibration: when the roles and
/// procedures exist, every one of those grants must show. Seeing some is
/// not enough: a login sees the grants on the securables it has a right on,
/// and no others.
pub(super) fn permissions_hidden(ctx: &Context) -> Option<String> {
    let expected: Vec<(&str, &str)> = ctx
        .policy
        .expected_grants()
        .filter(|(role, proc)| ctx.principal(role).is_some() && ctx.catalog.object(proc).is_some())
        .collect();
    let shows = |role: &str, proc: &str| {
        ctx.grants().any(|p| {
            p.grantee.eq_ignore_ascii_case(role)
                && p.permission.eq_ignore_ascii_case("EXECUTE")
                && matches!(&p.on, Securable::Object { schema, name, .. }
                    if format!("{schema}.{name}").eq_ignore_ascii_case(proc))
        })
    };
    let missing: Vec<String> = expected
        .iter()
        .filter(|(r, p)| !shows(r, p))
        .map(|(r, p)| format!("EXECUTE on {p} to {r}"))
        .collect();
    match expected.first() {
        Some((role, proc)) if missing.len() == expected.len() => Some(format!(
            "the permission catalog (sys.database_permissions) shows none of the {} EXECUTE grants a deploy \
             makes (such as EXECUTE on {proc} to {role}), so it is not showing grants and no grant can be \
             ruled out",
            expected.len()
        )),
        Some(_) if !missing.is_empty() => Some(format!(
            "the permission catalog (sys.database_permissions) shows {} of the {} EXECUTE grants a deploy makes \
             and not {}: either the checking login does not see every grant, and then no grant can be ruled out, \
             or they were revoked (fencepost migrate grants them again)",
            expected.len() - missing.len(),
            expected.len(),
            missing.join(", ")
        )),
        None if ctx.catalog.permissions.is_empty() => Some(
            "the permission catalog (sys.database_permissions) is empty and the deployed roles and procedures \
             it could be checked against are missing, so no grant can be ruled out"
                .into(),
        ),
        _ => None,
    }
}
