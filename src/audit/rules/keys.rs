//! FP017, the keys: control of a certificate or asymmetric key is the right
//! to sign a module with it (ADD SIGNATURE), and a signed module runs with the
//! rights of the key's user as well as the caller's. A service that controls
//! a key can lend those rights to code it may alter.

use super::super::catalog::Securable;
use super::{Context, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    for p in ctx.grants() {
        let Securable::Key { key, name } = &p.on else {
            continue;
        };
        if key == "SYMMETRIC KEY"
            || ctx
                .implies_any(p, &ctx.class_of(&p.on), &["CONTROL", "ALTER", "TAKE OWNERSHIP"])
                .is_none()
            || ctx.services_reached_by(&p.grantee).is_empty()
        {
            continue;
        }
        let why = format!(
            "{} on {key}::{name} lets {} sign modules with it, and a signed module runs with the rights of the \
             key's user: whatever that user may do to the fence, the module may",
            p.permission.to_uppercase(),
            p.grantee
        );
        report
            .findings
            .push(ctx.grant_finding(Rule::RunsAsSomeoneElse, p, &why));
    }
}
