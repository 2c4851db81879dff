//! The one table an UPDATE of a common table expression changes. "CREATE
//! VIEW", Updatable Views (which "WITH common_table_expression" applies to
//! an expression a statement modifies): "Any modifications, including
//! UPDATE, INSERT, and DELETE statements, must reference columns from only
//! one base table". So when each column an UPDATE's SET clause names is
//! one the expression's query takes as `alias.column` from a table its
//! FROM clause names under that alias, that table is the one changed, and
//! the others the query joins are only read. When any of it cannot be told
//! (`*`, an expression, an unqualified column, a nested expression), the
//! answer is `None`, and every table the query names counts as written.

use super::dml_targets::Expression;

/// The table (as the query names it) the UPDATE whose verb is at word `at`
/// changes through `e`, when it can be told.
pub(super) fn updated_base(words: &[String], at: usize, e: &Expression) -> Option<String> {
    let set = (at..words.len())
        .take_while(|&i| words[i] != ";")
        .find(|&i| words[i] == "set")?;
    let query: Vec<String> = e.query.split(' ').map(str::to_string).collect();
    let items = select_items(&query)?;
    let named: Vec<(String, String)> = if e.columns.is_empty() {
        items
    } else if e.columns.len() == items.len() {
        // The column list renames the query's columns in order.
        e.columns
            .iter()
            .cloned()
            .zip(items.into_iter().map(|(_, a)| a))
            .collect()
    } else {
        return None;
    };
    let mut base: Option<String> = None;
    for column in set_columns(words, set + 1)? {
        let (_, alias) = named.iter().find(|(name, _)| *name == column)?;
        let table = top_level_table(&query, alias)?;
        if base.get_or_insert_with(|| table.clone()) != &table {
            return None;
        }
    }
    base
}

/// The columns an UPDATE's SET clause starting at word `from` assigns,
/// unqualified: `column = ...`, `alias.column = ...`, `@v = column = ...`.
/// `None` when one cannot be read.
fn set_columns(words: &[String], from: usize) -> Option<Vec<String>> {
    let ends = |w: &str| matches!(w, ";" | "from" | "where" | "output" | "option");
    let mut out = Vec::new();
    for item in top_level_items(words, from, ends) {
        let column = match item {
            [v, eq, c, eq2, ..] if v.starts_with('@') && eq == "=" && eq2 == "=" => c,
            [c, eq, ..] if !c.starts_with('@') && eq == "=" => c,
            // A variable alone (`@v = expr`) changes no column.
            [v, eq, ..] if v.starts_with('@') && eq == "=" => continue,
            _ => return None,
        };
        out.push(unqualified(column).to_string());
    }
    (!out.is_empty()).then_some(out)
}

/// Each column of a query's select list, by its output name, with the
/// alias of the table it is taken from: `a.c`, `a.c AS n`, `a.c n`,
/// `n = a.c`. `None` when the query is no plain SELECT or a column is
/// anything else.
fn select_items(query: &[String]) -> Option<Vec<(String, String)>> {
    let mut at = 1;
    if query.first()? != "select" {
        return None;
    }
    if query.get(at).is_some_and(|w| w == "distinct" || w == "all") {
        at += 1;
    }
    if query.get(at).is_some_and(|w| w == "top") {
        return None;
    }
    let mut out = Vec::new();
    for item in top_level_items(query, at, |w| w == "from") {
        let (name, source) = match item {
            [source] => (None, source),
            [source, as_, name] if as_ == "as" => (Some(name), source),
            [name, eq, source] if eq == "=" => (Some(name), source),
            [source, name] => (Some(name), source),
            _ => return None,
        };
        let (alias, column) = source.rsplit_once('.')?;
        if alias.contains('.') || column == "*" {
            return None;
        }
        out.push((name.map_or(column, String::as_str).to_string(), alias.to_string()));
    }
    Some(out)
}

/// The comma-separated items from word `from` until a word at depth zero
/// that `ends` (or the end).
fn top_level_items(words: &[String], from: usize, ends: impl Fn(&str) -> bool) -> Vec<&[String]> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = from;
    let mut i = from;
    while let Some(w) = words.get(i) {
        match w.as_str() {
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                out.push(&words[start..i]);
                start = i + 1;
            }
            w if depth == 0 && ends(w) => break,
            _ => {}
        }
        i += 1;
    }
    if start < i {
        out.push(&words[start..i]);
    }
    out
}

/// The table the query's own FROM clause names `alias` (`name [AS]
/// alias` after FROM, JOIN or a comma, outside every parenthesis: a derived
/// table or subquery has aliases of its own). `None` when the alias names
/// a derived table, or is not named once so.
fn top_level_table(query: &[String], alias: &str) -> Option<String> {
    let mut depth = 0usize;
    let mut found: Option<String> = None;
    for (i, w) in query.iter().enumerate() {
        match w.as_str() {
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            _ if depth == 0 && w == alias && i > 0 => {
                let base = if query[i - 1] == "as" { i.checked_sub(2)? } else { i - 1 };
                let before = base.checked_sub(1).map(|b| query[b].as_str());
                if !matches!(before, Some("from" | "join" | ",")) && query[base] != ")" {
                    continue;
                }
                let name = &query[base];
                if name == ")" || !name.chars().any(|c| c.is_alphanumeric() || c == '_') || found.is_some() {
                    return None;
                }
                found = Some(name.clone());
            }
            _ => {}
        }
    }
    found
}

fn unqualified(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::super::super::module_text::{normalized, words};
    use super::super::dml_targets::common_table_expressions;
    use super::*;

    fn base(sql: &str) -> Option<String> {
        let w = words(&normalized(sql));
        let e = common_table_expressions(&w).remove(0);
        let at = w.iter().position(|x| x == "update")?;
        updated_base(&w, at, &e)
    }

    #[test]
    fn the_set_columns_name_the_one_table_changed() {
        let join = "WITH Log AS (SELECT w.Id, w.Shipped, r.Total AS Amount FROM ops.Log AS w \
                    JOIN ops.Orders r ON r.Id = w.Id)";
        assert_eq!(
            base(&format!("{join} UPDATE Log SET Shipped = 1;")).as_deref(),
            Some("ops.log")
        );
        assert_eq!(
            base(&format!("{join} UPDATE Log SET Amount = 2 WHERE Id = 1;")).as_deref(),
            Some("ops.orders")
        );
        assert_eq!(
            base("WITH L (a, b) AS (SELECT x.Id, y.Total FROM ops.Log x, ops.Orders y) UPDATE L SET @v = b = 1;")
                .as_deref(),
            Some("ops.orders")
        );
    }

    #[test]
    fn control_columns_of_two_tables_or_unreadable_ones_tell_nothing() {
        let join = "WITH Log AS (SELECT w.Id, w.Shipped, r.Total FROM ops.Log AS w JOIN ops.Orders r ON r.Id = w.Id)";
        assert_eq!(base(&format!("{join} UPDATE Log SET Shipped = 1, Total = 2;")), None);
        assert_eq!(
            base("WITH Log AS (SELECT * FROM ops.Log) UPDATE Log SET Shipped = 1;"),
            None
        );
        assert_eq!(
            base("WITH Log AS (SELECT Shipped FROM ops.Log) UPDATE Log SET Shipped = 1;"),
            None
        );
        assert_eq!(
            base("WITH Log AS (SELECT w.Shipped + 1 AS s FROM ops.Log w) UPDATE Log SET s = 1;"),
            None
        );
        assert_eq!(
            base("WITH L (a) AS (SELECT w.Id, w.S FROM ops.Log w) UPDATE L SET a = 1;"),
            None
        );
        assert_eq!(
            base("WITH L AS (SELECT d.Id FROM (SELECT w.Id FROM ops.Log AS w) AS d) UPDATE L SET Id = 1;"),
            None
        );
    }

    #[test]
    fn a_derived_tables_own_alias_is_not_the_querys() {
        assert_eq!(
            base(
                "WITH L AS (SELECT w.Id, w.S FROM (SELECT w.Id FROM ops.Log AS w) AS d JOIN ops.Orders AS w \
                 ON w.Id = d.Id) UPDATE L SET S = 1;"
            )
            .as_deref(),
            Some("ops.orders")
        );
    }
}
