//! Whether a view's text lets a modification through it change a table it
//! names, read as "Modify Data Through a View" states the limits: the
//! columns changed come from one base table, taken directly (no aggregate,
//! GROUP BY, HAVING or DISTINCT, no UNION and the like), and "the previous
//! restrictions apply to any subqueries in the FROM clause of the view". A
//! table named only inside a subquery (EXISTS, IN, a scalar subquery)
//! filters the rows and is never changed; one in a derived table or a
//! common table expression may be, when that level keeps its columns plain
//! too. A windowed aggregate (`COUNT(*) OVER ()`) derives its own column
//! only, and a schema-qualified call (`dbo.Max(x)`) is a user function, not
//! an aggregate: the plain columns beside either stay updatable. A
//! delimited identifier (`[Group]`, `"Union"`) is a name, never a keyword
//! ("Database Identifiers").

use std::ops::Range;

use super::super::module_text::{contains_words, normalized};
use crate::tsql::{code_in_place, keywords_in_place};

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
    // Both views keep every byte where it is: one to read names in, one to
    // read keywords and parentheses in (no comment, string or delimited
    // name can open or close a level there).
    let code = code_in_place(definition);
    let keywords = keywords_in_place(definition).to_ascii_lowercase();
    through_level(&code, &keywords, &normalized(table))
}

/// Whether one level of a query (the view, or a derived table or common
/// table expression inside it) lets a modification change `needle`: its own
/// select list and clauses keep the columns plain, and it names `needle`
/// itself or through a table source that does.
fn through_level(code: &str, keywords: &str, needle: &str) -> bool {
    let groups = groups(keywords);
    if read_only(&outside(keywords, &groups)) {
        return false;
    }
    contains_words(&normalized(&outside(code, &groups)), needle)
        || groups
            .iter()
            .filter(|(_, source)| *source)
            .any(|(inner, _)| through_level(&code[inner.clone()], &keywords[inner.clone()], needle))
}

/// Whether a level's own text (its groups left as `()`) makes its columns
/// read-only: GROUP BY, HAVING, DISTINCT, a set operator or PIVOT, or an
/// aggregate that is neither windowed nor a schema's function.
fn read_only(top: &str) -> bool {
    let words = words_with_calls(&normalized(top));
    words.iter().enumerate().any(|(i, w)| {
        let next = words.get(i + 1).map(|n| n.word.as_str());
        match w.word.as_str() {
            // GROUP is a clause only as GROUP BY (not WITHIN GROUP).
            "group" => next == Some("by"),
            word if READ_ONLY.contains(&word) => true,
            word => w.call && !w.qualified && AGGREGATES.contains(&word) && next != Some("over"),
        }
    })
}

/// `text` without the inside of each of `groups` (each left as `()`).
fn outside(text: &str, groups: &[(Range<usize>, bool)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (inner, _) in groups {
        out.push_str(&text[at..inner.start]);
        at = inner.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The inside of each outermost parenthesis of `keywords` (lower-cased,
/// names and strings blanked), and whether it is opened where a table
/// source stands: after FROM, JOIN, APPLY, AS in a common table expression,
/// or a comma in a FROM list (after a comma in the select list it is a
/// scalar subquery).
fn groups(keywords: &str) -> Vec<(Range<usize>, bool)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut source = false;
    for (at, c) in keywords.char_indices() {
        match c {
            '(' => {
                if depth == 0 {
                    let before = outside(&keywords[..at], &out);
                    let before = before.trim_end();
                    let last = before
                        .rsplit(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or("");
                    source = before.ends_with(',') && in_from_list(before)
                        || ["from", "join", "apply", "as"].contains(&last);
                    start = at + 1;
                }
                depth += 1;
            }
            ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push((start..at, source));
                }
            }
            _ => {}
        }
    }
    out
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

/// A word of a level's text.
struct Word {
    word: String,
    /// Whether a `(` follows it: a call.
    call: bool,
    /// Whether a `.` comes right before it: a name in a schema.
    qualified: bool,
}

/// Each word of `top` (normalized: no spaces around dots).
fn words_with_calls(top: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut qualified = false;
    let mut previous = None;
    let mut chars = top.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            if word.is_empty() {
                qualified = previous == Some('.');
            }
            word.push(c);
            previous = Some(c);
            continue;
        }
        previous = Some(c);
        if !word.is_empty() {
            let mut call = c == '(';
            if c.is_whitespace() {
                while chars.peek().is_some_and(|n| n.is_whitespace()) {
                    chars.next();
                }
                call = chars.peek() == Some(&'(');
            }
            out.push(Word {
                word: std::mem::take(&mut word),
                call,
                qualified,
            });
        }
    }
    if !word.is_empty() {
        out.push(Word {
            word,
            call: false,
            qualified,
        });
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
        // WITHIN GROUP is no GROUP BY; a windowed call derives its column only.
        assert!(writes_through(
            "CREATE VIEW v AS SELECT a, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY g) OVER (PARTITION BY a) m \
             FROM fence.Resource",
            t
        ));
        // An aggregating level in FROM keeps its table read-only.
        assert!(!writes_through(
            "CREATE VIEW v AS SELECT d.a FROM (SELECT a, COUNT(*) n FROM fence.Resource GROUP BY a) d",
            t
        ));
        // A parenthesis in a comment or a name opens no level.
        assert!(writes_through(
            "CREATE VIEW v AS SELECT [a(] /* ( */ FROM (SELECT [a(] FROM fence.Resource) d",
            t
        ));
    }
}
