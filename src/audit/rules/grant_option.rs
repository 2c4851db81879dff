//! FP007, the grant option: EXECUTE (or CONTROL) on a shipped procedure or a
//! code schema granted WITH GRANT OPTION lets its holder hand the procedure
//! to anyone, ForceRelease included, whatever the fence roles say.

use super::super::catalog::{PermissionState, Securable};
use super::{Context, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    for p in ctx.grants().filter(|p| {
        // EXECUTE on procedures, held or implied (CONTROL).
        p.state == PermissionState::GrantWithGrantOption && ctx.implies(p, "OBJECT", "EXECUTE")
    }) {
        let on = match &p.on {
            Securable::Object { schema, name, .. } if ctx.policy.procedure(&format!("{schema}.{name}")).is_some() => {
                format!("{schema}.{name}")
            }
            Securable::Schema { schema } if ctx.policy.is_fence_scoped_schema(schema) => format!("schema {schema}"),
            Securable::Database => "the whole database".into(),
            _ => continue,
        };
        let why = format!(
            "{} on {on} WITH GRANT OPTION lets {} grant it to anyone, beyond the fence roles' split of who may \
             lease, read or fence out a holder",
            p.permission.to_uppercase(),
            p.grantee
        );
        report
            .findings
            .push(ctx.grant_finding(Rule::ExecuteBeyondRole, p, &why));
    }
}
