//! What a lending module's statements name, read as SQL Server resolves
//! the names when they run in a lent context ("Qualifying Names Inside
//! Stored Procedures", CREATE PROCEDURE): a name in two or three parts is
//! itself; a one-part name in a data statement resolves in the module's
//! own schema, then dbo; a one-part EXECUTE or DDL statement (`TRUNCATE
//! TABLE t`) resolves in the default schema of the user named in the
//! EXECUTE AS clause, then dbo, and in a context that is the caller's (a
//! signature adds rights but keeps the caller's user) in whatever default
//! schema the caller sets for itself ("ALTER USER"), so in any schema.

use super::super::catalog::Object;
use super::super::module_text::{
    contains_words, ddl_unqualified, executed_unqualified, names_unqualified_in, normalized, same_name, words,
};
use super::super::rules::Context;
use super::cte_update::updated_base;
use super::dml_targets::{Expression, Target, alias_base, common_table_expressions, targets};
use super::row_writes::written;
use super::run_time_sql::run_time_sql;
use crate::tsql::{code_only, without_comments};

/// A module's statements, read once for every name asked about.
pub(super) struct Statements<'a> {
    /// Where a one-part name in a data statement resolves first.
    schema: &'a str,
    /// Normalized, comments out, strings in: a string dynamic SQL runs
    /// names what it names.
    text: String,
    /// Normalized code only.
    code: String,
    executed: Vec<String>,
    ddl: Vec<String>,
    /// The data statements' targets ([`super::dml_targets`]).
    targets: Vec<Target>,
    /// The targets of the text it runs from string literals
    /// ([`super::run_time_sql`]): never chained, a one-part name resolved in
    /// whatever schema the context's user has.
    run_time: Vec<Target>,
    /// The targets that are common table expressions, even one named as a
    /// table is: the statement writes what the expression's query selects
    /// from.
    shadowed: Vec<Target>,
    expressions: Vec<Expression>,
    /// Whether one of them names no object (an alias its FROM clause does
    /// not name): the statement may write any table it names.
    aliased: Vec<&'static str>,
    /// `database.`, normalized, as a three-part name starts.
    here: String,
    /// The permissions its statements use to change rows
    /// ([`super::row_writes::written`]).
    written: Vec<&'static str>,
    /// The first construct that runs SQL from text, if any
    /// ([`super::run_time_sql`]): it may run anything.
    runs_text: Option<&'static str>,
    /// Whether it writes a text column in place (WRITETEXT, UPDATETEXT),
    /// statements whose target [`super::dml_targets`] does not read.
    text_columns: bool,
}

impl<'a> Statements<'a> {
    /// `body`: `m`'s statements (a trigger's after its header).
    pub(super) fn new(ctx: &Context, m: &'a Object, body: &str) -> Self {
        let code = normalized(&code_only(body));
        let here = format!("{}.", normalized(&ctx.catalog.database));
        let words = words(&code);
        let expressions = common_table_expressions(&words);
        let is_expression = |t: &Target| {
            one_part(&t.name, &here).is_some_and(|n| expressions.iter().any(|e| e.name == n && e.statement == t.at))
        };
        let (mut shadowed, mut in_code): (Vec<Target>, Vec<Target>) =
            targets(&words).into_iter().partition(is_expression);
        // An UPDATE of an expression whose SET columns tell its one base
        // table writes that table alone ([`super::cte_update`]).
        shadowed.retain(|t| {
            let expression =
                one_part(&t.name, &here).and_then(|n| expressions.iter().find(|e| e.name == n && e.statement == t.at));
            let base = expression
                .filter(|_| t.verb == "UPDATE")
                .and_then(|e| updated_base(&words, t.at, e))
                .filter(|b| !expressions.iter().any(|e| e.name == *b && e.statement == t.at));
            match base {
                Some(name) => {
                    in_code.push(Target { name, ..t.clone() });
                    false
                }
                None => true,
            }
        });
        let no_object = |n: &str| {
            !n.starts_with(['@', '#'])
                && ctx.catalog.object(&format!("{}.{n}", m.schema)).is_none()
                && ctx.catalog.object(&format!("dbo.{n}")).is_none()
        };
        // An alias its FROM clause names is the table it stands for.
        for t in &mut in_code {
            if let Some(base) = one_part(&t.name, &here)
                .filter(|n| no_object(n))
                .and_then(|n| alias_base(&words, t.at, n))
            {
                t.name = base;
            }
        }
        let aliased = in_code
            .iter()
            .filter(|t| one_part(&t.name, &here).is_some_and(no_object))
            .map(|t| t.verb)
            .collect();
        let run_time_sql = run_time_sql(body);
        let run_time = run_time_sql
            .constant
            .iter()
            .flat_map(|text| targets(&super::super::module_text::words(&normalized(&code_only(text)))))
            .collect();
        let text_columns = words.iter().any(|w| w == "writetext" || w == "updatetext");
        Statements {
            schema: &m.schema,
            run_time,
            text: normalized(&without_comments(body)),
            executed: executed_unqualified(body),
            ddl: ddl_unqualified(body, &ctx.catalog.database),
            code,
            targets: in_code,
            shadowed,
            expressions,
            aliased,
            here,
            written: written(body, &run_time_sql.constant),
            runs_text: run_time_sql.arbitrary,
            text_columns,
        }
    }

    /// The permissions its statements use to change rows.
    pub(super) fn written(&self) -> &[&'static str] {
        &self.written
    }

    /// The first construct that runs SQL from text, if any.
    pub(super) fn runs_text(&self) -> Option<&'static str> {
        self.runs_text
    }

    /// Whether it writes a text column in place.
    pub(super) fn writes_text_columns(&self) -> bool {
        self.text_columns
    }

    /// Whether a data statement of the code checked for `verb` writes
    /// `schema.name`: its target is that object, in two or three parts or
    /// in one that resolves in the module's own schema, or a name no object
    /// has (an alias) while the code names that object; or a statement of
    /// the text it runs from string literals names it.
    pub(super) fn writes_to(&self, ctx: &Context, verb: &str, schema: &str, name: &str) -> bool {
        let two = normalized(&format!("{schema}.{name}"));
        let run_time = self.run_time.iter().filter(|t| t.verb == verb).any(|t| {
            let n = t.name.strip_prefix(&self.here).unwrap_or(&t.name);
            n == two || one_part(n, &self.here).is_some_and(|n| same_name(n, name))
        });
        self.writes_in_code(ctx, verb, schema, name) || run_time
    }

    /// [`Self::writes_to`] by a statement of the code itself, not by text it
    /// runs: the writes an ownership chain may let through.
    pub(super) fn writes_in_code(&self, ctx: &Context, verb: &str, schema: &str, name: &str) -> bool {
        let two = normalized(&format!("{schema}.{name}"));
        let direct = self
            .targets
            .iter()
            .filter(|t| t.verb == verb)
            .any(|t| match one_part(&t.name, &self.here) {
                Some(n) => same_name(n, name) && resolves_in(ctx, self.schema, schema, name),
                None => t.name.strip_prefix(&self.here).unwrap_or(&t.name) == two,
            });
        let through_expression = self
            .shadowed
            .iter()
            .filter(|t| t.verb == verb)
            .any(|t| self.expression_names(ctx, t, schema, name));
        direct || through_expression || self.aliased.contains(&verb) && self.names_in_data(ctx, schema, name)
    }

    /// Whether the query of the common table expression `expression`, or of
    /// one it selects from, names `schema.name` as a data statement would.
    fn expression_names(&self, ctx: &Context, target: &Target, schema: &str, name: &str) -> bool {
        let two = normalized(&format!("{schema}.{name}"));
        let mut seen: Vec<&str> = Vec::new();
        let mut next = vec![one_part(&target.name, &self.here).unwrap_or(&target.name)];
        while let Some(e) = next.pop() {
            if seen.contains(&e) {
                continue;
            }
            seen.push(e);
            let Some(query) = self
                .expressions
                .iter()
                .find(|x| x.name == e && x.statement == target.at)
                .map(|x| x.query.as_str())
            else {
                continue;
            };
            if contains_words(query, &two)
                || resolves_in(ctx, self.schema, schema, name) && names_unqualified_in(query, name)
            {
                return true;
            }
            next.extend(
                self.expressions
                    .iter()
                    .filter(|x| x.statement == target.at && names_unqualified_in(query, &x.name))
                    .map(|x| x.name.as_str()),
            );
        }
        false
    }

    /// Whether the code names `schema.name` when it runs as `user` (the
    /// EXECUTE AS user whose context it runs in; `None`: its caller's).
    pub(super) fn names(&self, ctx: &Context, user: Option<&str>, schema: &str, name: &str) -> bool {
        self.naming(ctx, user, schema, name, &self.code)
    }

    /// [`Self::names`], with names in two or three parts inside strings
    /// counted too.
    pub(super) fn names_or_strings(&self, ctx: &Context, user: Option<&str>, schema: &str, name: &str) -> bool {
        self.naming(ctx, user, schema, name, &self.text)
    }

    /// Whether the code names `schema.name` as a data statement would: in
    /// two or three parts, or in one that resolves in the module's own
    /// schema.
    fn names_in_data(&self, ctx: &Context, schema: &str, name: &str) -> bool {
        contains_words(&self.code, &normalized(&format!("{schema}.{name}")))
            || resolves_in(ctx, self.schema, schema, name) && names_unqualified_in(&self.code, name)
    }

    fn naming(&self, ctx: &Context, user: Option<&str>, schema: &str, name: &str, text: &str) -> bool {
        if contains_words(text, &normalized(&format!("{schema}.{name}"))) {
            return true;
        }
        if resolves_in(ctx, self.schema, schema, name) && names_unqualified_in(&self.code, name) {
            return true;
        }
        let by_context = self.executed.iter().chain(&self.ddl).any(|e| same_name(e, name));
        by_context && resolves_for(ctx, user, schema, name)
    }
}

/// `name` without the database's `db.` or `db..`, when it has one part.
fn one_part<'n>(name: &'n str, here: &str) -> Option<&'n str> {
    let name = name
        .strip_prefix(here)
        .map_or(name, |n| n.strip_prefix('.').unwrap_or(n));
    (!name.contains('.')).then_some(name)
}

/// Whether a one-part EXECUTE or DDL name run as `user` (`None`: the
/// caller's own context, whose default schema the caller sets) resolves to
/// `schema.name`: in the user's default schema, then dbo.
pub(super) fn resolves_for(ctx: &Context, user: Option<&str>, schema: &str, name: &str) -> bool {
    match user {
        None => true,
        Some(user) => {
            let default = ctx.principal(user).and_then(|p| p.default_schema.as_deref());
            resolves_in(ctx, default.unwrap_or("dbo"), schema, name)
        }
    }
}

/// Whether a one-part name looked up first in `first` resolves to
/// `schema.name`: there, or in dbo when `first` has no object of the name.
fn resolves_in(ctx: &Context, first: &str, schema: &str, name: &str) -> bool {
    first.eq_ignore_ascii_case(schema)
        || schema.eq_ignore_ascii_case("dbo") && ctx.catalog.object(&format!("{first}.{name}")).is_none()
}
