//! Whether a view's text lets a modification through it change a table it
//! names, read as "Modify Data Through a View" states the limits: the
//! columns changed come from one base table, taken directly (no aggregate,
//! GROUP BY, HAVING or DISTINCT, no UNION and the like). A table named only
//! inside a subquery (EXISTS, IN, a scalar subquery) filters the rows and is
//! never changed; one in a derived table or a common table expression may
//! be, so it counts. A delimited identifier (`[Group]`, `"Union"`) is a
//! name, never a keyword ("Database Identifiers").

use super::super::module_text::{contains_words, normalized};
use crate::tsql::code_only;

/// Words that make a view's top level read-only.
const READ_ONLY: [&str; 8] = [
    "distinct",
    "group",
    "having",
    "union",
    "except",
    "intersect",
    "pivot",
    "unpivot",
];

/// Aggregate functions ("Aggregate Functions (Transact-SQL)"), which no
/// modification through a view may change.
const AGGREGATES: [&str; 17] = [
    "count",
    "count_big",
    "sum",
    "avg",
    "min",
    "max",
    "stdev",
    "stdevp",
    "var",
    "varp",
    "string_agg",
    "checksum_agg",
    "approx_count_distinct",
    "approx_percentile_cont",
    "approx_percentile_disc",
    "grouping",
    "grouping_id",
];

/// Whether a modification through the view `definition` may change
/// `table` (`schema.name`), by its text.
pub(super) fn writes_through(definition: &str, table: &str) -> bool {
    let code = code_only(definition);
    let text = normalized(&code);
    let (top, open) = levels(&text);
    // Keywords are looked for where no delimited identifier stands.
    let (bare, _) = levels(&normalized(&without_delimited(&code)));
    let words = words_with_calls(&bare);
    let read_only = words
        .iter()
        .any(|(w, call)| READ_ONLY.contains(&w.as_str()) || *call && AGGREGATES.contains(&w.as_str()));
    if read_only {
        return false;
    }
    let needle = normalized(table);
    contains_words(&top, &needle) || open.iter().any(|inner| contains_words(inner, &needle))
}

/// `code` with each delimited identifier (`[...]`, `"..."`) replaced by a
/// plain placeholder name, so that what it spells is never read as a
/// keyword.
fn without_delimited(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        let close = match c {
            '[' => ']',
            '"' => '"',
            _ => {
                out.push(c);
                continue;
            }
        };
        // `]]` and `""` stand for the closing character itself.
        while let Some(n) = chars.next() {
            if n == close {
                if chars.peek() == Some(&close) {
                    chars.next();
                    continue;
                }
                break;
            }
        }
        out.push_str("delimited_name");
    }
    out
}

/// The text outside every parenthesis (each group left as `()`), and the
/// text of each outermost group opened where a table source stands (after
/// FROM, JOIN, APPLY, AS in a common table expression, or a comma in a FROM
/// list: after a comma in the select list it is a scalar subquery).
fn levels(text: &str) -> (String, Vec<String>) {
    let mut top = String::new();
    let mut open = Vec::new();
    let mut depth = 0usize;
    let mut group = String::new();
    let mut source = false;
    for c in text.chars() {
        match c {
            '(' => {
                if depth == 0 {
                    let before = top.trim_end();
                    let last = before
                        .rsplit(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or("");
                    source = before.ends_with(',') && in_from_list(before)
                        || ["from", "join", "apply", "as"].contains(&last);
                    top.push('(');
                    group.clear();
                } else {
                    group.push(c);
                }
                depth += 1;
            }
            ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    top.push(')');
                    if source {
                        open.push(std::mem::take(&mut group));
                    }
                } else {
                    group.push(c);
                }
            }
            _ if depth == 0 => top.push(c),
            _ => group.push(c),
        }
    }
    (top, open)
}

/// Whether the last clause `top` is in is a FROM list: its last clause
/// keyword is FROM, JOIN or APPLY, not SELECT, WHERE and the like.
fn in_from_list(top: &str) -> bool {
    const CLAUSES: [&str; 12] = [
        "select", "from", "join", "apply", "where", "group", "having", "order", "on", "set", "values", "union",
    ];
    top.rsplit(|c: char| !c.is_alphanumeric() && c != '_')
        .find(|w| CLAUSES.contains(w))
        .is_some_and(|w| ["from", "join", "apply", "on"].contains(&w))
}

/// Each word of `top`, and whether a `(` follows it (a call).
fn words_with_calls(top: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut chars = top.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            let mut call = c == '(';
            if c.is_whitespace() {
                while chars.peek().is_some_and(|n| n.is_whitespace()) {
                    chars.next();
                }
                call = chars.peek() == Some(&'(');
            }
            out.push((std::mem::take(&mut word), call));
        }
    }
    if !word.is_empty() {
        out.push((word, false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::writes_through;

    #[test]
    fn reads_the_limits_of_modifying_data_through_a_view() {
        let t = "fence.Resource";
        assert!(writes_through("CREATE VIEW v AS SELECT a FROM fence.Resource", t));
        assert!(writes_through(
            "CREATE VIEW v AS SELECT a FROM [fence].[Resource] r JOIN x ON 1=1",
            t
        ));
        assert!(!writes_through(
            "CREATE VIEW v AS SELECT a, COUNT(*) c FROM fence.Resource GROUP BY a",
            t
        ));
        assert!(!writes_through(
            "CREATE VIEW v AS SELECT MAX (a) m FROM fence.Resource",
            t
        ));
        assert!(!writes_through(
            "CREATE VIEW v AS SELECT o.Id FROM dbo.Orders o WHERE NOT EXISTS (SELECT 1 FROM fence.Resource)",
            t
        ));
        assert!(writes_through(
            "CREATE VIEW v AS SELECT d.a FROM (SELECT a FROM fence.Resource) d",
            t
        ));
        assert!(writes_through(
            "CREATE VIEW v AS WITH l AS (SELECT a FROM fence.Resource) SELECT a FROM l",
            t
        ));
        // A column named like an aggregate is no call.
        assert!(writes_through("CREATE VIEW v AS SELECT [count] FROM fence.Resource", t));
    }
}
