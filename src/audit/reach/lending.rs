//! Procedures that lend their caller one write: "EXECUTE AS Clause" runs a
//! module's statements as the principal it names (OWNER: the module's
//! owner), and "Module Signing" / "ADD SIGNATURE" runs a signed module with
//! the rights of the key's user added to the caller's. Whoever may run such
//! a procedure makes the writes its own text makes with that principal's
//! rights, and only those: the edge goes from the procedure to the goal,
//! never to the principal, since the caller cannot do anything else it may.
//! SQL built at run time is [`super::runners`]' (the caller then runs what
//! it likes as that principal).

use std::collections::BTreeSet;

use super::super::catalog::{Object, ObjectKind, Securable};
use super::super::module_text::{referenced_tables, words};
use super::super::rules::Context;
use super::code::ordered_tables;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::principals::hierarchy_note;
use super::right::Right;
use super::runners::callable;
use super::{callers, denies};
use crate::tsql::{code_only, quote_name, quote_qualified};

/// A principal whose rights a module's statements run with.
struct Lender {
    principal: String,
    /// `runs as maint (EXECUTE AS 'maint')`.
    how: String,
    evidence: String,
    cut: String,
}

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let fence = &ctx.policy.fence_schema;
    let tables = ordered_tables(ctx);
    for m in ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Procedure && callable(ctx, o))
    {
        let Some(text) = m.definition.as_deref() else { continue };
        let verbs = written(text);
        if verbs.is_empty() {
            continue;
        }
        let named = referenced_tables(text, fence, &tables);
        let name = m.qualified_name();
        let mut lends = false;
        for lender in lenders(ctx, m) {
            let Some((right, verb, table)) = named.iter().find_map(|t| {
                let target = Securable::Object {
                    schema: fence.clone(),
                    name: (*t).clone(),
                    column: None,
                };
                verbs
                    .iter()
                    .find_map(|v| lent(ctx, rights, &lender.principal, &target, v).map(|r| (r, *v, *t)))
            }) else {
                continue;
            };
            let table = format!("{fence}.{table}");
            let held = if right.holder.eq_ignore_ascii_case(&lender.principal) {
                String::new()
            } else {
                format!(" through {}", right.holder)
            };
            graph.add(
                Node::code(&name),
                &name,
                Edge::new(
                    Node::Goal(Goal::WriteFence),
                    Kind::Acts,
                    format!(
                        "{name} {} and its text makes {verb} on {table}, which {p} may make{held}{}: its caller makes \
                         that write with {p}'s right, and nothing else {p} may do",
                        lender.how,
                        hierarchy_note(ctx, right, verb, &table),
                        p = lender.principal,
                    ),
                    format!("{}; its text names {table}; {}", lender.evidence, right.evidence),
                    format!("{} (or {})", lender.cut, right.cut),
                )
                .on(table),
            );
            lends = true;
        }
        if lends {
            callers::edges(ctx, rights, graph, m);
        }
    }
}

/// The permissions a module's statements use to change rows (TRUNCATE
/// needs ALTER), in the order a path names them. In doubt a word counts:
/// `UPDATE` anywhere in the code is an UPDATE.
fn written(text: &str) -> Vec<&'static str> {
    let words: BTreeSet<String> = words(&code_only(text)).into_iter().collect();
    let has = |w: &[&str]| w.iter().any(|w| words.contains(*w));
    let merge = has(&["merge"]);
    [
        ("UPDATE", merge || has(&["update", "updatetext", "writetext"])),
        ("INSERT", merge || has(&["insert"])),
        ("DELETE", merge || has(&["delete"])),
        ("ALTER", has(&["truncate"])),
    ]
    .into_iter()
    .filter(|(_, used)| *used)
    .map(|(p, _)| p)
    .collect()
}

/// Whom `m`'s statements run as, besides its caller: its EXECUTE AS
/// principal, and the users of the keys that signed it.
fn lenders(ctx: &Context, m: &Object) -> Vec<Lender> {
    let name = m.qualified_name();
    let target = quote_qualified(&m.schema, &m.name);
    let mut out = Vec::new();
    if let Some(as_whom) = m.execute_as.as_deref() {
        // SELF is whoever created it, which the catalog does not name.
        let runs_as = if as_whom.eq_ignore_ascii_case("OWNER") {
            ctx.catalog.owner_of(m)
        } else if as_whom.eq_ignore_ascii_case("CALLER") || as_whom.eq_ignore_ascii_case("SELF") {
            None
        } else {
            Some(as_whom)
        };
        if let Some(runs_as) = runs_as {
            out.push(Lender {
                principal: runs_as.to_string(),
                how: format!("runs as {runs_as} (EXECUTE AS {as_whom})"),
                evidence: format!("sys.sql_modules: {name} has execute_as {as_whom}"),
                cut: format!("ALTER PROCEDURE {target} ... WITH EXECUTE AS CALLER;"),
            });
        }
    }
    for signer in &m.signed_by {
        let Some((class, key)) = signer.split_once("::") else {
            continue;
        };
        let user = ctx
            .catalog
            .signing_keys
            .iter()
            .flatten()
            .find(|k| k.key.eq_ignore_ascii_case(class) && k.name.eq_ignore_ascii_case(key))
            .and_then(|k| k.user.as_deref());
        let Some(user) = user else { continue };
        out.push(Lender {
            principal: user.to_string(),
            how: format!("is signed by {signer}, so it runs with the rights of its user {user} added to its caller's"),
            evidence: format!("sys.crypt_properties: {name} is signed by {signer}, mapped to user {user}"),
            cut: format!("DROP SIGNATURE FROM {target} BY {class} {};", quote_name(key)),
        });
    }
    out
}

/// A right of `principal` (its own, a role's, public's) that gives
/// `wanted` on `target` to a session of `principal` past every DENY: code
/// running as it cannot drop a membership to get past one.
fn lent<'r>(
    ctx: &Context,
    rights: &'r [Right],
    principal: &str,
    target: &Securable,
    wanted: &str,
) -> Option<&'r Right> {
    let holders = ctx.holders(principal);
    rights
        .iter()
        .filter(|r| !r.login && holders.contains(&r.holder.to_lowercase()))
        .find(|r| {
            denies::reaches(ctx, r, target, wanted).is_some_and(|b| b.all_denied().iter().all(|d| !holders.contains(d)))
        })
}
