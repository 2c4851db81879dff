//! Whether a view's text lets a modification through it change a table it
//! names, read as "Modify Data Through a View" states the limits: the
//! columns changed come from one base table, taken directly (no aggregate,
//! GROUP BY, HAVING or DISTINCT, no UNION and the like). A table named only
//! inside a subquery (EXISTS, IN, a scalar subquery) filters the rows and is
//! never changed; one in a derived table or a common table expression may
//! be, so it counts.

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

/// Aggregate functions, which no modification through a view may change.
const AGGREGATES: [&str; 12] = [
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
];

/// Whether a modification through the view `definition` may change
/// `table` (`schema.name`), by its text.
pub(super) fn writes_through(definition: &str, table: &str) -> bool {
    let text = normalized(&code_only(definition));
    let (top, open) = levels(&text);
    let words = words_with_calls(&top);
    let read_only = words
        .iter()
        .any(|(w, call)| READ_ONLY.contains(&w.as_str()) || *call && AGGREGATES.contains(&w.as_str()));
    if read_only {
        return false;
    }
    let needle = normalized(table);
    contains_words(&top, &needle) || open.iter().any(|inner| contains_words(inner, &needle))
}

/// The text outside every parenthesis (each group left as `()`), and the
/// text of each outermost group opened where a table source stands (after
/// FROM, JOIN, APPLY, a comma, or AS in a common table expression).
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
                    source = before.ends_with(',') || ["from", "join", "apply", "as"].contains(&last);
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
