//! FP026: Service Broker queue activation. The activation procedure runs,
//! as its queue's EXECUTE AS principal, on every message that arrives: a
//! principal that may send to the queue decides what that procedure reads,
//! and if it reaches the fence, the sender reaches it as someone else.

use super::super::catalog::ExecuteAs;
use super::indirect_code::text_reach;
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::quote_qualified;

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let Some(queues) = &ctx.catalog.activated_queues else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::QueueActivation,
            reason: "Service Broker queues and their activation procedures (sys.service_queues, sys.services) \
                     could not be read"
                .into(),
        });
        return;
    };
    for q in queues {
        let Some(def) = ctx.catalog.object(&q.procedure).and_then(|o| o.definition.as_deref()) else {
            report.cannot_verify.push(CannotVerify {
                rule: Rule::QueueActivation,
                reason: format!(
                    "the text of {}, activation procedure of queue {}, could not be read",
                    q.procedure, q.name
                ),
            });
            continue;
        };
        let how = text_reach(ctx, &q.procedure, def, true);
        if how.is_empty() {
            continue;
        }
        let runs_as = match q.runs_as() {
            Some(ExecuteAs::Owner) => ctx
                .catalog
                .object(&q.procedure)
                .and_then(|o| ctx.catalog.owner_of(o))
                .unwrap_or("its owner")
                .to_string(),
            Some(ExecuteAs::Principal(p)) => p.to_string(),
            None => "the principal that set activation".into(),
        };
        let mut feeders: Vec<&String> = q.senders.iter().chain(q.owner.as_ref()).collect();
        feeders.sort_by_key(|f| f.to_lowercase());
        feeders.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
        if let Some(reason) = &ctx.permissions_hidden {
            // Who may SEND is read from the permission catalog too.
            report.cannot_verify.push(CannotVerify {
                rule: Rule::QueueActivation,
                reason: format!(
                    "queue {} activates {}, which reaches the fence, and who may send to it cannot be known: {reason}",
                    q.name, q.procedure
                ),
            });
            continue;
        }
        let (schema, name) = q.name.split_once('.').unwrap_or(("dbo", &q.name));
        for f in feeders.into_iter().filter(|f| !ctx.is_admin(f)) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::QueueActivation,
                principal: Some(f.clone()),
                object: format!("QUEUE::{}", q.name),
                permission: Some(format!("activates {} as {runs_as}", q.procedure)),
                why: format!(
                    "{f} may put messages on {}, whose activation procedure {} runs as {runs_as} and reaches the \
                     fence ({}): {f} decides what it reads, outside the procedures' grants{}",
                    q.name,
                    q.procedure,
                    how.join(", "),
                    ctx.reach_note(f)
                ),
                fix: format!(
                    "ALTER QUEUE {} WITH ACTIVATION (DROP); or revoke SEND on its services from {f}",
                    quote_qualified(schema, name)
                ),
            });
        }
    }
}
