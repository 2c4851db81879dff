//! Whom a lending module's statements run with, and the writes to the
//! fence tables those rights let through: shared by the modules that lend
//! their own write ([`super::lending`]) and those that lend a callee's
//! ([`super::lending_calls`]).

use super::super::catalog::{ExecuteAs, Object, ObjectKind, Securable};
use super::super::rules::Context;
use super::code::{chain_owner, ordered_tables};
use super::denies;
use super::deny_rows::refused_in_fixed_text;
use super::lent_names::Statements;
use super::node::{Goal, Node};
use super::principals::hierarchy_note;
use super::right::Right;
use super::signing_login::all_powerful;
use super::trigger_header::{DATA, trigger_body};
use crate::tsql::{quote_name, quote_qualified};

/// A principal whose rights a module's statements run with.
#[derive(Clone)]
pub(super) struct Lender {
    pub(super) principal: String,
    /// `runs as maint (EXECUTE AS 'maint')`.
    pub(super) how: String,
    pub(super) evidence: String,
    pub(super) cut: String,
    /// The key of a signature (`CERTIFICATE::Writer`); `None` for EXECUTE
    /// AS, whose context stays in force in the modules it calls.
    pub(super) key: Option<String>,
    /// Whose context these rights are added to, whose DENYs still refuse
    /// what they allow.
    pub(super) beside: Beside,
    /// Whether no permission check applies to what it runs: a signing
    /// login in sysadmin ("Permissions Hierarchy": the check is passed
    /// over). Its DENYs and the context's bind nothing.
    pub(super) unchecked: bool,
}

/// The context a signature's rights are added to ("Module Signing": a
/// signature adds rights and does not change the execution context), whose
/// DENYs stay in force beside them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Beside {
    /// None: EXECUTE AS replaces its caller's context.
    Nobody,
    /// The module's caller: whoever the path starts from, unless a context
    /// switched before.
    Caller,
    /// The principal an EXECUTE AS in force names: the module's own, or the
    /// one of the code that reached it ("EXECUTE AS Clause": the context
    /// stays in force in the modules it calls).
    Principal(String),
}

impl Lender {
    /// The principals (lower-cased) whose DENY of `wanted` on `target`,
    /// refusing `right` (this lender's), binds a caller that holds one of
    /// them: "Permissions Hierarchy", a permission denied to any principal
    /// of the context is refused, and the module's fixed text revokes no
    /// DENY, whatever CONTROL its rights bring. Empty when the caller's
    /// context is not in force beside the rights; `None` when the principal
    /// they are added to holds such a DENY itself, which refuses them to
    /// every caller.
    pub(super) fn refusal(
        &self,
        ctx: &Context,
        right: &Right,
        target: &Securable,
        wanted: &str,
    ) -> Option<Vec<String>> {
        match &self.beside {
            _ if self.unchecked => Some(Vec::new()),
            Beside::Nobody => Some(Vec::new()),
            Beside::Caller => Some(refused_in_fixed_text(ctx, right, target, wanted)),
            Beside::Principal(p) => {
                let holders = ctx.holders(p);
                let refused = refused_in_fixed_text(ctx, right, target, wanted);
                (!refused.iter().any(|r| holders.contains(r))).then(Vec::new)
            }
        }
    }

    /// This lender reached from code running in `context`: a signature's
    /// rights are then added to that context's principal when it is an
    /// EXECUTE AS one (no key), or to whatever that context's own rights
    /// are added to.
    pub(super) fn beside_of(&self, context: &Lender) -> Beside {
        match (&self.beside, &context.key) {
            (Beside::Nobody, _) => Beside::Nobody,
            (_, None) => Beside::Principal(context.principal.clone()),
            (_, Some(_)) => context.beside.clone(),
        }
    }
}

/// A write or call some code makes: `what` follows "its text", as in
/// `makes UPDATE on fence.Resource, which maint may make`.
#[derive(Clone)]
pub(super) struct Made {
    pub(super) what: String,
    /// Where it leads: a goal, or the node of what it writes through.
    pub(super) to: Node,
    /// What it reaches, when `to` is a goal.
    pub(super) table: String,
    /// Whether an ownership chain, not a lent right, lets it through.
    pub(super) chained: bool,
    /// Whether the text runs SQL from text, so may make whatever
    /// else its caller hands it, not this write alone.
    pub(super) anything: bool,
    pub(super) evidence: String,
    pub(super) cut: String,
    /// The principals (lower-cased) a DENY to whom, in the caller's
    /// context, refuses the write or call ([`Lender::refusal`]).
    pub(super) refused: Vec<String>,
}

/// The statements of a module: a trigger's after its header, which names
/// the table it is on.
pub(super) fn body(m: &Object) -> Option<&str> {
    let text = m.definition.as_deref()?;
    Some(if m.kind == ObjectKind::Trigger {
        trigger_body(text)
    } else {
        text
    })
}

/// The first write `text` makes to a fence table that one of `contexts`
/// may make, or that ownership chaining from `owner` lets through
/// unchecked.
pub(super) fn own_write(
    ctx: &Context,
    rights: &[Right],
    text: &Statements,
    contexts: &[&Lender],
    owner: Option<&str>,
) -> Option<Made> {
    let verbs = match text.runs_text() {
        // SQL run from text may be any statement on any table.
        Some(_) => vec!["UPDATE", "INSERT", "DELETE", "ALTER"],
        None => text.written().to_vec(),
    };
    if verbs.is_empty() {
        return None;
    }
    let fence = &ctx.policy.fence_schema;
    let tables = ordered_tables(ctx);
    let user = context_user(contexts);
    // "Ownership Chains": a chain skips the checks of the data statements on
    // a table, never those of DDL (TRUNCATE, SWITCH, DROP) nor of text run
    // from a string.
    let chains = owner.is_some_and(|o| {
        ctx.catalog.engine.chains_ownership && ctx.tables_owner().is_some_and(|t| t.eq_ignore_ascii_case(o))
    });
    let text_columns = text.writes_text_columns();
    let built = match text.runs_text() {
        Some(construct) => format!("runs SQL from text ({construct}), which may be anything and so "),
        None => String::new(),
    };
    tables
        .iter()
        .filter(|t| text.runs_text().is_some() || text.names_or_strings(ctx, user, fence, t))
        .find_map(|t| {
            let table = format!("{fence}.{t}");
            let data = verbs
                .iter()
                .copied()
                .filter(|v| DATA.contains(v))
                .find(|v| text_columns || text.writes_in_code(ctx, v, fence, t));
            if let Some(data) = data.filter(|_| chains) {
                let owner = owner.unwrap_or_default();
                return Some(Made {
                    what: format!(
                        "makes {data} on {table}, owned by {owner} as {table} is: ownership chaining skips the \
                         permission check"
                    ),
                    evidence: format!("its owner is {owner}, the owner of {fence}"),
                    cut: format!("(give it an owner other than {owner}, or drop it)"),
                    to: Node::Goal(Goal::WriteFence),
                    table,
                    chained: true,
                    anything: false,
                    refused: Vec::new(),
                });
            }
            let target = Securable::Object {
                schema: fence.clone(),
                name: t.clone(),
                column: None,
            };
            verbs.iter().find_map(|v| {
                contexts.iter().find_map(|c| {
                    let right = lent(ctx, rights, &c.principal, &target, v)?;
                    Some(Made {
                        what: format!(
                            "{built}makes {v} on {table}, which {} may make{}",
                            c.principal,
                            how_held(ctx, right, &c.principal, v, &table)
                        ),
                        to: Node::Goal(Goal::WriteFence),
                        table: table.clone(),
                        chained: false,
                        anything: text.runs_text().is_some(),
                        evidence: right.evidence.clone(),
                        cut: right.cut.clone(),
                        refused: c.refusal(ctx, right, &target, v)?,
                    })
                })
            })
        })
}

/// ` through db_datawriter` when `right` is a role's `principal` is in.
/// How `principal` holds `right` for `verb` on `on`, as a path's step says
/// it after "may make" or "may EXECUTE": through whom, when not itself, and
/// by which permission of the hierarchy, when not that one.
pub(super) fn how_held(ctx: &Context, right: &Right, principal: &str, verb: &str, on: &str) -> String {
    format!("{}{}", held(right, principal), hierarchy_note(ctx, right, verb, on))
}

fn held(right: &Right, principal: &str) -> String {
    if right.holder.eq_ignore_ascii_case(principal) {
        String::new()
    } else {
        format!(" through {}", right.holder)
    }
}

/// Whom `m`'s statements run as, besides its caller: its EXECUTE AS
/// principal, and the users of the keys that signed it.
pub(super) fn lenders(ctx: &Context, m: &Object) -> Vec<Lender> {
    let name = m.qualified_name();
    let target = quote_qualified(&m.schema, &m.name);
    let mut out = Vec::new();
    if let Some(as_whom) = m.runs_as() {
        // A user is named as the clause quotes it: a user called Owner is
        // not the keyword.
        let (runs_as, as_whom) = match as_whom {
            ExecuteAs::Owner => (chain_owner(ctx, m), "OWNER".to_string()),
            ExecuteAs::Principal(p) => (Some(p), format!("'{}'", p.replace('\'', "''"))),
        };
        if let Some(runs_as) = runs_as {
            out.push(Lender {
                principal: runs_as.to_string(),
                how: format!("runs as {runs_as} (EXECUTE AS {as_whom})"),
                evidence: format!("sys.sql_modules: {name} has execute_as {as_whom}"),
                cut: format!("ALTER {} {target} ... WITH EXECUTE AS CALLER;", kind(m)),
                key: None,
                beside: Beside::Nobody,
                unchecked: false,
            });
        }
    }
    // A signature on a module WITH EXECUTE AS adds to that principal's
    // context, which replaced the caller's.
    let beside = match out.first() {
        Some(runs_as) => Beside::Principal(runs_as.principal.clone()),
        None => Beside::Caller,
    };
    for signer in &m.signed_by {
        let Some((class, key)) = signer.split_once("::") else {
            continue;
        };
        let Some(signing) = ctx
            .catalog
            .signing_keys
            .iter()
            .flatten()
            .find(|k| k.key.eq_ignore_ascii_case(class) && k.name.eq_ignore_ascii_case(key))
        else {
            continue;
        };
        if let Some((why, sysadmin)) = all_powerful(ctx, signing) {
            out.push(Lender {
                principal: "dbo".to_string(),
                how: format!(
                    "is signed by {signer}, whose login's server rights it runs with added to its caller's: {why}, \
                     which passes every check here as dbo"
                ),
                evidence: format!("sys.crypt_properties: {name} is signed by {signer}; sys.server_principals: {why}"),
                cut: format!("DROP SIGNATURE FROM {target} BY {class} {};", quote_name(key)),
                key: Some(signer.clone()),
                beside: beside.clone(),
                unchecked: sysadmin,
            });
        }
        let Some(user) = signing.user.as_deref() else { continue };
        out.push(Lender {
            principal: user.to_string(),
            how: format!("is signed by {signer}, so it runs with the rights of its user {user} added to its caller's"),
            evidence: format!("sys.crypt_properties: {name} is signed by {signer}, mapped to user {user}"),
            cut: format!("DROP SIGNATURE FROM {target} BY {class} {};", quote_name(key)),
            key: Some(signer.clone()),
            beside: beside.clone(),
            unchecked: false,
        });
    }
    out
}

fn kind(m: &Object) -> &'static str {
    if m.kind == ObjectKind::Trigger {
        "TRIGGER"
    } else {
        "PROCEDURE"
    }
}

/// A right of `principal` (its own, a role's, public's) that gives
/// `wanted` on `target` to a session of `principal` past every DENY: code
/// running as it cannot drop a membership to get past one.
pub(super) fn lent<'r>(
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

/// The user whose context statements run with `contexts`' rights run in:
/// the first EXECUTE AS principal; `None` when only signatures add rights
/// to the caller's own context.
pub(super) fn context_user<'c>(contexts: &[&'c Lender]) -> Option<&'c str> {
    contexts.iter().find(|c| c.key.is_none()).map(|c| c.principal.as_str())
}
