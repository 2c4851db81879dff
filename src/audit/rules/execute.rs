//! FP007: EXECUTE that reaches procedures a service's role does not grant:
//! database- or schema-wide EXECUTE (which also covers every procedure added
//! later) and shipped procedures granted outside the layout.

use std::collections::BTreeSet;

use super::super::catalog::Securable;
use super::{Context, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    // EXECUTE without ALTER: CONTROL, which implies both, is FP005's (on a
    // procedure or schema) or FP003's (on the database).
    for p in ctx
        .grants()
        .filter(|p| ctx.implies(p, "OBJECT", "EXECUTE") && !ctx.implies(p, "OBJECT", "ALTER"))
    {
        let reached = ctx.services_reached_by(&p.grantee);
        if reached.is_empty() {
            continue;
        }
        let why = match &p.on {
            Securable::Database => format!(
                "EXECUTE on the whole database gives {} every procedure, fence_admin's included, and every \
                 procedure added later; the fence roles are granted procedure by procedure",
                p.grantee
            ),
            Securable::Schema { schema } if ctx.policy.is_fence_scoped_schema(schema) => format!(
                "schema-wide EXECUTE on {schema} gives {} every procedure in it, and every procedure added \
                 later; the fence roles are granted procedure by procedure",
                p.grantee
            ),
            Securable::Object { schema, name, .. } => {
                let proc = format!("{schema}.{name}");
                if ctx.policy.procedure(&proc).is_none() {
                    continue;
                }
                let beyond: Vec<&String> = reached
                    .iter()
                    .filter(|s| !allowed(ctx, s).contains(&proc.to_lowercase()))
                    .collect();
                if beyond.is_empty() {
                    continue;
                }
                let names: Vec<&str> = beyond.iter().map(|s| s.as_str()).collect();
                format!(
                    "EXECUTE on {proc} reaches {}, whose fence role does not include it: the roles split who may \
                     lease, who may only read and who may fence out a holder",
                    names.join(", ")
                )
            }
            _ => continue,
        };
        report
            .findings
            .push(ctx.grant_finding(Rule::ExecuteBeyondRole, p, &why));
    }
}

/// The shipped procedures the layout gives `service` through its fence roles,
/// lower-cased.
pub(super) fn allowed(ctx: &Context, service: &str) -> BTreeSet<String> {
    let roles: Vec<&String> = ctx
        .policy
        .service_roles
        .iter()
        .filter(|r| r.eq_ignore_ascii_case(service) || ctx.members_of(r).contains(&service.to_lowercase()))
        .collect();
    ctx.policy
        .procedures
        .iter()
        .filter(|p| {
            p.granted_to
                .iter()
                .any(|g| roles.iter().any(|r| r.eq_ignore_ascii_case(g)))
        })
        .map(|p| p.name.to_lowercase())
        .collect()
}
