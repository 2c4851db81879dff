//! The objects a text's data statements write, as "INSERT", "UPDATE",
//! "DELETE" and "MERGE (Transact-SQL)" name them: the target right after
//! `INSERT [TOP (n)] [INTO]`, `UPDATE [TOP (n)]`, `DELETE [TOP (n)] [FROM]`
//! and `MERGE [TOP (n)] [INTO]` (MERGE may insert, update and delete). A
//! table a statement only reads (`INSERT INTO ops.Log SELECT ... FROM
//! ops.Orders`) is no target: "CREATE TRIGGER": a DML trigger fires for a
//! statement that modifies its table or view, not one that reads it.

/// One write: the permission it is checked for and the target's name as
/// the text gives it (normalized, lower-cased, in one, two or three parts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) verb: &'static str,
    pub(super) name: String,
    /// Where its statement's verb stands in the words.
    pub(super) at: usize,
}

/// The writes in `words` (`module_text::words` of normalized code).
pub(super) fn targets(words: &[String]) -> Vec<Target> {
    let mut out = Vec::new();
    // "OUTPUT Clause": `OUTPUT ... INTO table` inserts into that table.
    let mut output = false;
    for (i, w) in words.iter().enumerate() {
        match w.as_str() {
            "output" => output = true,
            ";" => output = false,
            "into" if output => {
                output = false;
                if let Some(name) = words.get(i + 1).filter(|n| names_an_object(n)) {
                    out.push(Target {
                        verb: "INSERT",
                        name: name.clone(),
                        at: i,
                    });
                }
            }
            _ => {}
        }
        let verbs: &[&'static str] = match w.as_str() {
            "insert" => &["INSERT"],
            "update" => &["UPDATE"],
            "delete" => &["DELETE"],
            "merge" => &["INSERT", "UPDATE", "DELETE"],
            _ => continue,
        };
        if !starts_statement(words, i) {
            continue;
        }
        let mut at = i + 1;
        if words.get(at).is_some_and(|n| n == "top") {
            at = skip_parenthesized(words, at + 1);
            if words.get(at).is_some_and(|n| n == "percent") {
                at += 1;
            }
        }
        if words.get(at).is_some_and(|n| n == "into" || n == "from") {
            at += 1;
        }
        output = false;
        let Some(name) = words.get(at).filter(|n| names_an_object(n)) else {
            continue;
        };
        out.extend(verbs.iter().map(|verb| Target {
            verb,
            name: name.clone(),
            at: i,
        }));
    }
    out
}

/// A common table expression: its name, the words of its query, and where
/// the one statement it belongs to starts.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Expression {
    pub(super) name: String,
    /// The names its column list gives the query's columns, in order;
    /// empty when it has none.
    pub(super) columns: Vec<String>,
    pub(super) query: String,
    pub(super) statement: usize,
}

/// The common table expressions in `words`: `WITH name [(cols)] AS (query)
/// [, name [(cols)] AS (query)]...` before a statement. "WITH
/// common_table_expression": such a name may be a base table's, and a
/// reference to it in that statement (and no other) is to the expression,
/// whose base is what its query selects from.
pub(super) fn common_table_expressions(words: &[String]) -> Vec<Expression> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w != "with" {
            continue;
        }
        let mut list: Vec<(String, Vec<String>, String)> = Vec::new();
        let mut at = i + 1;
        let statement = loop {
            let Some(name) = words
                .get(at)
                .filter(|n| !n.contains('.') && n.chars().all(|c| c.is_alphanumeric() || c == '_'))
            else {
                break None;
            };
            let after_columns = skip_parenthesized(words, at + 1);
            let opens = words.get(after_columns).is_some_and(|a| a == "as")
                && words.get(after_columns + 1).is_some_and(|p| p == "(");
            if !opens {
                break None;
            }
            let end = skip_parenthesized(words, after_columns + 1);
            let columns = words[(at + 2).min(after_columns)..after_columns.saturating_sub(1).max(at + 1)]
                .iter()
                .filter(|c| *c != ",")
                .cloned()
                .collect();
            list.push((
                name.clone(),
                columns,
                words[after_columns + 2..end.saturating_sub(1).max(after_columns + 2)].join(" "),
            ));
            if words.get(end).is_some_and(|c| c == ",") {
                at = end + 1;
            } else {
                break Some(end);
            }
        };
        if let Some(statement) = statement {
            out.extend(list.into_iter().map(|(name, columns, query)| Expression {
                name,
                columns,
                query,
                statement,
            }));
        }
    }
    out
}

/// Whether the verb at `i` starts a statement of its own.
fn starts_statement(words: &[String], i: usize) -> bool {
    let next = words.get(i + 1).map_or("", String::as_str);
    let before = i.checked_sub(1).map_or("", |b| words[b].as_str());
    // `SET ... = UPDATE(...)` and `IF UPDATE(col)` in a trigger test a column.
    if next == "(" {
        return false;
    }
    // A cascade action: ON DELETE / ON UPDATE, then CASCADE, NO ACTION,
    // SET NULL or SET DEFAULT.
    let action = matches!(next, "cascade" | "no")
        || next == "set" && matches!(words.get(i + 2).map(String::as_str), Some("null" | "default"));
    if before == "on" && action {
        return false;
    }
    // MERGE's own clauses; a permission named in GRANT, DENY or REVOKE.
    !(before == "then" || matches!(next, "statistics" | "on" | "," | "to") || before == ",")
}

/// The object a one-part target `alias` at word `at` stands for, when its
/// statement's FROM clause names it so ("UPDATE": `UPDATE x SET ... FROM
/// ops.Log AS x JOIN ...`, the table the alias names is the one changed):
/// `name [AS] alias` after FROM, JOIN or a comma, before the statement's
/// end (`;`) or the next data statement.
pub(super) fn alias_base(words: &[String], at: usize, alias: &str) -> Option<String> {
    let ends = |w: &str| w == ";" || matches!(w, "insert" | "update" | "delete" | "merge");
    let end = words
        .iter()
        .enumerate()
        .skip(at + 1)
        .find(|(_, w)| ends(w))
        .map_or(words.len(), |(i, _)| i);
    (at + 1..end).filter(|&i| words[i] == alias).find_map(|i| {
        let base = if words.get(i - 1).is_some_and(|w| w == "as") {
            i - 2
        } else {
            i - 1
        };
        let before = base.checked_sub(1).map(|b| words[b].as_str());
        (base > at && matches!(before, Some("from" | "join" | ",")) && names_an_object(&words[base]))
            .then(|| words[base].clone())
    })
}

/// Whether a word may name a table (or a variable or temporary table),
/// not punctuation.
fn names_an_object(word: &str) -> bool {
    word.chars()
        .any(|c| c.is_alphanumeric() || matches!(c, '_' | '@' | '#'))
}

/// The index past a parenthesized group starting at `at` (or `at` itself
/// when none starts there).
fn skip_parenthesized(words: &[String], at: usize) -> usize {
    if words.get(at).is_none_or(|w| w != "(") {
        return at;
    }
    let mut depth = 0;
    for (j, w) in words.iter().enumerate().skip(at) {
        match w.as_str() {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    words.len()
}

#[cfg(test)]
mod tests {
    use super::super::super::module_text::{normalized, words};
    use super::*;

    fn read(sql: &str) -> Vec<(&'static str, String)> {
        targets(&words(&normalized(sql)))
            .into_iter()
            .map(|t| (t.verb, t.name))
            .collect()
    }

    #[test]
    fn each_statement_names_the_object_it_writes() {
        assert_eq!(
            read("INSERT INTO ops.Log (Id) SELECT Id FROM ops.Orders; UPDATE [ops].[T] SET x = 1; DELETE FROM u"),
            vec![
                ("INSERT", "ops.log".to_string()),
                ("UPDATE", "ops.t".to_string()),
                ("DELETE", "u".to_string())
            ]
        );
    }

    #[test]
    fn top_into_and_from_are_passed_over_and_merge_writes_three_ways() {
        assert_eq!(
            read(
                "DELETE TOP (5) FROM ops.A; INSERT TOP (1) PERCENT INTO ops.B VALUES (1); MERGE INTO ops.C AS c USING x"
            ),
            vec![
                ("DELETE", "ops.a".to_string()),
                ("INSERT", "ops.b".to_string()),
                ("INSERT", "ops.c".to_string()),
                ("UPDATE", "ops.c".to_string()),
                ("DELETE", "ops.c".to_string())
            ]
        );
    }

    #[test]
    fn a_statement_right_after_set_nocount_on_without_semicolon_is_read() {
        assert_eq!(
            read("SET NOCOUNT ON\nINSERT INTO ops.Orders VALUES (1) SET XACT_ABORT ON UPDATE ops.T SET x = 1"),
            vec![("INSERT", "ops.orders".to_string()), ("UPDATE", "ops.t".to_string())]
        );
    }

    #[test]
    fn merge_clauses_update_statistics_and_permissions_name_no_other_target() {
        assert_eq!(
            read(
                "MERGE INTO ops.Log AS t USING ops.Orders AS s ON t.Id = s.Id WHEN MATCHED THEN UPDATE SET t.x = 1 \
                 WHEN NOT MATCHED THEN INSERT (Id) VALUES (s.Id) WHEN NOT MATCHED BY SOURCE THEN DELETE; \
                 UPDATE STATISTICS ops.Orders; GRANT INSERT, UPDATE ON ops.Orders TO x; DENY DELETE ON ops.Orders TO y"
            ),
            vec![
                ("INSERT", "ops.log".to_string()),
                ("UPDATE", "ops.log".to_string()),
                ("DELETE", "ops.log".to_string())
            ]
        );
    }

    #[test]
    fn common_table_expressions_are_named_by_with_and_by_each_comma() {
        let sql = "WITH Log AS (SELECT 1 a), Pending (Id) AS (SELECT 2) UPDATE Log SET a = 2; \
                   SELECT * FROM t WITH (NOLOCK); CREATE PROCEDURE p WITH EXECUTE AS 'x' AS SELECT 1";
        let names: Vec<(String, Vec<String>, String, String)> = common_table_expressions(&words(&normalized(sql)))
            .into_iter()
            .map(|e| (e.name, e.columns, e.query, words(&normalized(sql))[e.statement].clone()))
            .collect();
        assert_eq!(
            names,
            vec![
                (
                    "log".to_string(),
                    vec![],
                    "select 1 a".to_string(),
                    "update".to_string()
                ),
                (
                    "pending".to_string(),
                    vec!["id".to_string()],
                    "select 2".to_string(),
                    "update".to_string()
                )
            ]
        );
    }

    #[test]
    fn output_into_inserts_into_its_table() {
        assert_eq!(
            read("DELETE FROM ops.Stash OUTPUT deleted.Id INTO fence.Recovery (Id); SELECT 1 INTO #t"),
            vec![
                ("DELETE", "ops.stash".to_string()),
                ("INSERT", "fence.recovery".to_string())
            ]
        );
    }

    #[test]
    fn an_alias_target_stands_for_the_table_its_from_clause_names() {
        let w = words(&normalized(
            "UPDATE x SET a = 1 FROM ops.Log AS x JOIN ops.Orders y ON y.Id = x.Id; UPDATE y SET a = 2 FROM ops.T y",
        ));
        assert_eq!(alias_base(&w, 0, "x"), Some("ops.log".to_string()));
        let second = w.iter().rposition(|x| x == "update").unwrap();
        assert_eq!(alias_base(&w, second, "y"), Some("ops.t".to_string()));
        // Control: no FROM clause names it.
        assert_eq!(alias_base(&w, second, "z"), None);
    }

    #[test]
    fn control_a_column_test_and_a_cascade_action_write_nothing() {
        assert!(
            read(
                "IF UPDATE(Amount) SELECT 1; ALTER TABLE t ADD FOREIGN KEY (a) REFERENCES u ON DELETE CASCADE \
                 ON UPDATE NO ACTION ON DELETE SET NULL ON UPDATE SET DEFAULT"
            )
            .is_empty()
        );
    }
}
