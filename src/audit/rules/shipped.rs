//! FP010 and FP011: the shipped procedures themselves, which must be exactly
//! as deployed and free of dynamic SQL and `EXECUTE AS`.

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::dynamic_constructs;
use super::modules::shipped_present;
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::{quote_qualified, same_definition};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    dynamic_sql(ctx, report);
    drift(ctx, report);
}

/// The shipped file is named as the policy spells the procedure, which need
/// not be how the catalog does (Babelfish lists names lower-cased).
fn redeploy(ctx: &Context, proc: &Object) -> String {
    let qualified = proc.qualified_name();
    let shipped = ctx
        .policy
        .procedure(&qualified)
        .map_or(qualified.as_str(), |p| p.name.as_str());
    let (schema, name) = shipped.split_once('.').unwrap_or((&proc.schema, &proc.name));
    format!(
        "fencepost migrate --overwrite-drift (it restores drifted procedures), or ALTER PROCEDURE {} with the shipped text of \
         procedures/{shipped}.sql",
        quote_qualified(schema, name)
    )
}

fn dynamic_sql(ctx: &Context, report: &mut Report) {
    let mut hidden = Vec::new();
    for proc in shipped_present(ctx) {
        let Some(def) = &proc.definition else {
            hidden.push(proc.qualified_name());
            continue;
        };
        let mut found: Vec<String> = dynamic_constructs(def).into_iter().map(String::from).collect();
        if let Some(who) = &proc.execute_as
            && !found.iter().any(|f| f == "EXECUTE AS")
        {
            found.push(format!("EXECUTE AS {who}"));
        }
        if !found.is_empty() {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::DynamicSql,
                principal: ctx.catalog.owner_of(proc).map(str::to_string),
                object: proc.qualified_name(),
                permission: Some(found.join(", ")),
                why: "dynamic SQL is checked against the caller's own rights and runs text no review saw, and \
                      EXECUTE AS changes whose rights the body runs with: either way the catalog no longer \
                      shows who can write the fence"
                    .into(),
                fix: redeploy(ctx, proc),
            });
        }
    }
    if !hidden.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::DynamicSql,
            reason: format!("the catalog hides the definition of {}", hidden.join(", ")),
        });
    }
}

fn drift(ctx: &Context, report: &mut Report) {
    let journal = ctx.catalog.deployed.as_ref();
    if journal.is_none() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::Drift,
            reason: format!(
                "the database has no deploy journal ({}.DeployedProcedure), so there is no deployed \
                 definition to compare with",
                ctx.policy.fence_schema
            ),
        });
    }
    let mut unknown = Vec::new();
    for shipped in &ctx.policy.procedures {
        let Some(proc) = ctx
            .catalog
            .object(&shipped.name)
            .filter(|o| o.kind == ObjectKind::Procedure)
        else {
            let (schema, name) = shipped.name.split_once('.').unwrap_or(("", &shipped.name));
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::Drift,
                principal: None,
                object: shipped.name.clone(),
                permission: Some("missing".into()),
                why: "a shipped procedure is missing, so services get errors instead of fenced outcomes".into(),
                fix: format!("fencepost migrate (recreates {})", quote_qualified(schema, name)),
            });
            continue;
        };
        let Some(journal) = journal else { continue };
        let recorded = journal
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(&shipped.name))
            .and_then(|d| d.definition_hash.as_deref());
        match (recorded, proc.definition_hash.as_deref()) {
            (Some(recorded), Some(current)) if !same_definition(recorded, current) => {
                report.findings.push(Finding {
                    path: Vec::new(),
                    rule: Rule::Drift,
                    principal: ctx.catalog.owner_of(proc).map(str::to_string),
                    object: proc.qualified_name(),
                    permission: Some("definition changed since deploy".into()),
                    why: "the procedure on the server is not the one deployed: it was altered by hand, and \
                          what it does to the fence rows is no longer what shipped"
                        .into(),
                    fix: redeploy(ctx, proc),
                });
            }
            (Some(_), Some(_)) => {}
            (None, _) => unknown.push(format!("{} (no hash recorded by the deploy)", proc.qualified_name())),
            (_, None) => unknown.push(format!("{} (no current definition hash)", proc.qualified_name())),
        }
    }
    if !unknown.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::Drift,
            reason: format!("cannot compare {}", unknown.join(", ")),
        });
    }
}
