//! FP017: code outside the shipped procedures that a service can run and
//! that runs as someone else: `WITH EXECUTE AS` a principal other than the
//! caller, or a signature that lends it a certificate user's rights. What
//! such code does cannot be read from its text (it may build table names at
//! run time), so being reachable is the finding.

use std::collections::BTreeSet;

use super::super::catalog::{ExecuteAs, Object, ObjectKind, Securable};
use super::super::module_text::referenced_tables;
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::{quote_name, quote_qualified};

/// Who can run a module, as far as the catalog shows.
enum Reach {
    Services(BTreeSet<String>),
    /// Only the permission catalog could tell, and it is hidden.
    Unknown,
}

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let mut unknown = Vec::new();
    for o in ctx.catalog.objects.iter().filter(|o| !ctx.is_shipped(o)) {
        let mut how: Vec<String> = o
            .runs_as()
            .zip(o.execute_as.as_deref())
            .filter(|(runs_as, _)| {
                let runs_as = match runs_as {
                    ExecuteAs::Owner => ctx.catalog.owner_of(o).unwrap_or("dbo"),
                    ExecuteAs::Principal(p) => p,
                };
                !super::rightless::holds_nothing(ctx, runs_as)
            })
            .map(|(_, who)| format!("EXECUTE AS {who}"))
            .into_iter()
            .collect();
        how.extend(o.signed_by.iter().map(|s| format!("signed by {s}")));
        if how.is_empty() {
            continue;
        }
        let services = match reach(ctx, o, &mut BTreeSet::new()) {
            Reach::Services(s) if s.is_empty() => continue,
            Reach::Services(s) => s,
            Reach::Unknown => {
                unknown.push(o.qualified_name());
                continue;
            }
        };
        let names: Vec<String> = services.into_iter().collect();
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::RunsAsSomeoneElse,
            principal: Some(names.join(", ")),
            object: o.qualified_name(),
            permission: Some(how.join(", ")),
            why: format!(
                "{} is not a shipped procedure, {} can run it, and it runs with rights other than the caller's: \
                 whatever its text names (SQL built at run time included), it may write the fence with them",
                o.qualified_name(),
                names.join(", ")
            ),
            fix: fix(o),
        });
    }
    if let Some(why) = &ctx.catalog.signatures_unreadable {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::RunsAsSomeoneElse,
            reason: format!("{why}, so a module signed with a certificate's rights cannot be ruled out"),
        });
    }
    if let (false, Some(why)) = (unknown.is_empty(), &ctx.permissions_hidden) {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::RunsAsSomeoneElse,
            reason: format!(
                "{} run{} as someone else, and whether a service can run {} is hidden: {why}",
                unknown.join(", "),
                if unknown.len() == 1 { "s" } else { "" },
                if unknown.len() == 1 { "it" } else { "them" }
            ),
        });
    }
}

fn fix(o: &Object) -> String {
    let kind = match o.kind {
        ObjectKind::Function => "FUNCTION",
        ObjectKind::Trigger => "TRIGGER",
        _ => "PROCEDURE",
    };
    let target = quote_qualified(&o.schema, &o.name);
    let mut steps: Vec<String> = o
        .signed_by
        .iter()
        .filter_map(|s| s.split_once("::"))
        .map(|(class, signer)| format!("DROP SIGNATURE FROM {target} BY {class} {};", quote_name(signer)))
        .collect();
    if o.execute_as.is_some() {
        steps.push(match o.kind {
            ObjectKind::DatabaseTrigger => format!("DROP TRIGGER {} ON DATABASE;", quote_name(&o.name)),
            _ => format!("DROP {kind} {target}; (or re-create it without EXECUTE AS)"),
        });
    }
    steps.join(" ")
}

/// The services that can run `o`: directly, by firing it, or through
/// another module they can run that names it. `seen` stops cycles.
fn reach(ctx: &Context, o: &Object, seen: &mut BTreeSet<String>) -> Reach {
    if !seen.insert(o.qualified_name().to_lowercase()) {
        return Reach::Services(BTreeSet::new());
    }
    // A DDL trigger fires on DDL by anyone: services with any DDL right, and
    // the deployer during `fencepost migrate`.
    if o.kind == ObjectKind::DatabaseTrigger {
        return Reach::Services(ctx.service_principals().cloned().collect());
    }
    let mut services = BTreeSet::new();
    let (rights, target): (&[&str], String) = match (o.kind, o.parent.as_deref()) {
        (ObjectKind::Trigger, Some(parent)) => (&["INSERT", "UPDATE", "DELETE"], parent.to_string()),
        (ObjectKind::Function | ObjectKind::View, _) => (&["EXECUTE", "SELECT"], o.qualified_name()),
        _ => (&["EXECUTE"], o.qualified_name()),
    };
    let (schema, name) = target.split_once('.').unwrap_or(("", &target));
    let on = Securable::Object {
        schema: schema.to_string(),
        name: name.to_string(),
        column: None,
    };
    // Any grant that implies one of those rights on it (CONTROL on it, its
    // schema or the database included).
    for p in ctx.grants() {
        if rights.iter().any(|r| ctx.reaches(p, &on, r)) {
            services.extend(ctx.services_reached_by(&p.grantee));
        }
    }
    let roles: &[&str] = if o.kind == ObjectKind::Trigger {
        &["db_owner", "db_datawriter"]
    } else {
        &["db_owner"]
    };
    for role in roles {
        services.extend(
            ctx.services_reached_by(role)
                .into_iter()
                .filter(|s| !s.eq_ignore_ascii_case(role)),
        );
    }
    if let Some(owner) = ctx.catalog.owner_of(o) {
        services.extend(ctx.services_reached_by(owner));
    }
    // Through callers: a module a service can run that names this one (or,
    // for a trigger, writes its table) runs it with no check of its own
    // when one owner owns both.
    for caller in
        ctx.catalog.objects.iter().filter(|c| {
            c.kind.is_module() && !ctx.is_shipped(c) && !c.is(&o.qualified_name()) && names(c, schema, name)
        })
    {
        match reach(ctx, caller, seen) {
            Reach::Services(s) => services.extend(s),
            Reach::Unknown => return Reach::Unknown,
        }
    }
    if services.is_empty() && ctx.permissions_hidden.is_some() {
        return Reach::Unknown;
    }
    Reach::Services(services)
}

fn names(module: &Object, schema: &str, name: &str) -> bool {
    module
        .definition
        .as_deref()
        .is_some_and(|d| !referenced_tables(d, schema, [&name.to_string()]).is_empty())
}
