//! What a lending module's statements reach besides the fence tables its
//! text names ([`super::lent_write`]). "EXECUTE AS Clause" and "ADD
//! SIGNATURE": an EXEC in the module is checked, as every statement there
//! is, against the principal it runs as or with the key's user's rights
//! added, so an EXEC of a fence_admin procedure that principal may run
//! runs it. "Modify Data Through a View" and "Synonyms (Database Engine)":
//! a write through an object [`super::writers`] follows to the fence is
//! checked on that object alone when the chain beyond it holds, so a
//! write there that principal may make goes on as a write by its holder
//! does ([`super::written_through`]); through one of another owner, the
//! base is checked too ([`super::broken_chains`]).

use super::super::catalog::{Object, Securable};
use super::super::rules::Context;
use super::broken_chains::{self, chains};
use super::code::admin_procedures;
use super::lent_names::Statements;
use super::lent_write::{Lender, Made, context_user, how_held, lent, own_write};
use super::node::{Goal, Node};
use super::right::Right;
use super::synonym_routes::{securable, ways_to};
use super::written_through::Through;

/// The first way `body` reaches `goal` with one of `contexts`' rights, or
/// by a chain from `owner`: a fence table it writes, or one it writes
/// through, for the fence tables; a fence_admin procedure it runs.
/// `body` is `m`'s statements, whose names resolve as [`Statements`] reads
/// them.
pub(super) fn own(
    ctx: &Context,
    rights: &[Right],
    (goal, through): (Goal, &[Through]),
    m: &Object,
    body: &str,
    contexts: &[&Lender],
    owner: Option<&str>,
) -> Option<Made> {
    let text = Statements::new(ctx, m, body);
    match goal {
        Goal::RunAdmin => own_admin(ctx, rights, &text, contexts, owner)
            .or_else(|| broken_chains::admin(ctx, rights, &text, contexts, owner)),
        _ => own_write(ctx, rights, &text, contexts, owner)
            .or_else(|| own_through(ctx, rights, through, &text, contexts, owner))
            .or_else(|| broken_chains::write(ctx, rights, &text, contexts, owner)),
    }
}

/// The first fence_admin procedure `body` runs, itself or by a synonym of
/// its owner, that one of `contexts` may run or a chain lets through.
fn own_admin(
    ctx: &Context,
    rights: &[Right],
    text: &Statements,
    contexts: &[&Lender],
    owner: Option<&str>,
) -> Option<Made> {
    let user = context_user(contexts);
    for proc in admin_procedures(ctx) {
        // The procedure and the synonyms for it of its owner; one the
        // catalog does not list is still named by its text.
        let ways: Vec<(String, Option<&Object>)> = match ctx.catalog.object(&proc) {
            Some(o) => ways_to(ctx, o)
                .into_iter()
                .map(|w| (w.qualified_name(), Some(w)))
                .collect(),
            None => vec![(proc.clone(), None)],
        };
        for (by_name, by) in ways {
            let (s, n) = by_name.split_once('.').unwrap_or(("", &by_name));
            if !text.names(ctx, user, s, n) {
                continue;
            }
            let named = if by_name.eq_ignore_ascii_case(&proc) {
                proc.clone()
            } else {
                format!("{proc} (by the synonym {by_name}, of its owner)")
            };
            if let Some(o) = by.and_then(|by| chains(ctx, owner, by)) {
                return Some(Made {
                    what: format!(
                        "runs {named}, owned by {o} as the caller is: ownership chaining skips the EXECUTE check"
                    ),
                    to: Node::Goal(Goal::RunAdmin),
                    table: proc.clone(),
                    chained: true,
                    anything: false,
                    evidence: format!("{by_name} is owned by {o}"),
                    cut: format!("(move {by_name} to another owner)"),
                    refused: Vec::new(),
                });
            }
            for c in contexts {
                let target = Securable::Object {
                    schema: s.to_string(),
                    name: n.to_string(),
                    column: None,
                };
                let Some(right) = lent(ctx, rights, &c.principal, &target, "EXECUTE") else {
                    continue;
                };
                let Some(refused) = c.refusal(ctx, right, &target, "EXECUTE") else {
                    continue;
                };
                return Some(Made {
                    what: format!(
                        "runs {named}, which {} may EXECUTE{}",
                        c.principal,
                        how_held(ctx, right, &c.principal, "EXECUTE", &by_name)
                    ),
                    to: Node::Goal(Goal::RunAdmin),
                    table: proc.clone(),
                    chained: false,
                    anything: false,
                    evidence: right.evidence.clone(),
                    cut: right.cut.clone(),
                    refused,
                });
            }
        }
    }
    None
}

/// The first write `text` makes through one of `through` (itself or a
/// synonym for it of its owner) that one of `contexts` may make there, or
/// that a chain from `owner` lets through.
fn own_through(
    ctx: &Context,
    rights: &[Right],
    through: &[Through],
    text: &Statements,
    contexts: &[&Lender],
    owner: Option<&str>,
) -> Option<Made> {
    let verbs = text.written();
    if verbs.is_empty() {
        return None;
    }
    let user = context_user(contexts);
    for t in through {
        let name = t.object.qualified_name();
        let verbs: Vec<&str> = verbs.iter().copied().filter(|v| t.starts.contains(v)).collect();
        let Some(first) = verbs.first() else { continue };
        for &by in &t.ways {
            if !text.names(ctx, user, &by.schema, &by.name) {
                continue;
            }
            let by_name = by.qualified_name();
            let named = if std::ptr::eq(by, t.object) {
                name.clone()
            } else {
                format!("{name} (by the synonym {by_name}, of its owner)")
            };
            let made = |what: String, evidence: &str, cut: &str, chained: bool, refused: Vec<String>| Made {
                what: format!("{what}{}", t.then),
                chained,
                anything: false,
                to: t.to.clone(),
                table: t.table.clone().unwrap_or_else(|| name.clone()),
                evidence: [evidence, &t.evidence]
                    .into_iter()
                    .filter(|e| !e.is_empty())
                    .collect::<Vec<_>>()
                    .join("; "),
                cut: cut.to_string(),
                refused,
            };
            if let Some(o) = chains(ctx, owner, by) {
                return Some(made(
                    format!(
                        "makes {first} on {named}, owned by {o} as the caller is: ownership chaining skips the permission check"
                    ),
                    &format!("{by_name} is owned by {o}"),
                    &format!("(move {by_name} to another owner)"),
                    true,
                    Vec::new(),
                ));
            }
            let target: Securable = securable(by);
            // A signed trigger the write fires adds its rights to the
            // context the write is made in: from an EXECUTE AS context,
            // the call walk follows it there ([`Lender::beside_of`]); its
            // own node weighs the caller's.
            for v in &verbs {
                for c in contexts.iter().filter(|c| !(t.signed_trigger && c.key.is_none())) {
                    let Some(right) = lent(ctx, rights, &c.principal, &target, v) else {
                        continue;
                    };
                    let Some(refused) = c.refusal(ctx, right, &target, v) else {
                        continue;
                    };
                    return Some(made(
                        format!(
                            "makes {v} on {named}, which {} may make{}",
                            c.principal,
                            how_held(ctx, right, &c.principal, v, &by_name)
                        ),
                        &right.evidence,
                        &right.cut,
                        false,
                        refused,
                    ));
                }
            }
        }
    }
    None
}
