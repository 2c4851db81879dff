//! SQL a module runs from text ("EXECUTE (Transact-SQL)": `EXEC
//! ('string')`, "sp_executesql"), run in the module's context, its
//! permissions checked there and never skipped by an ownership chain
//! ("Ownership Chains": chaining "does not apply to dynamic SQL"). Any such
//! text may do anything its context may: even text of string literals alone
//! may run a procedure, another text, a GRANT or an ALTER ROLE, or a text
//! its caller hands it as a parameter (`sp_executesql N'EXEC (@s)', ...`).
//! The statements of string literals alone are read besides, so the
//! objects they write are known (the triggers they fire).

use super::super::module_text::dynamic_constructs;
use crate::tsql::{Token, TokenKind, tokenize};

/// What a module's text runs from text.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct RunTimeSql {
    /// The texts run from string literals alone, their quotes undone.
    pub(super) constant: Vec<String>,
    /// The first construct that runs text, if any: it may run anything.
    pub(super) arbitrary: Option<&'static str>,
}

/// What `text` runs from text.
pub(super) fn run_time_sql(text: &str) -> RunTimeSql {
    let mut out = RunTimeSql {
        // Its own WITH EXECUTE AS (or an EXECUTE AS statement) runs no text.
        arbitrary: dynamic_constructs(text).into_iter().find(|c| *c != "EXECUTE AS"),
        ..RunTimeSql::default()
    };
    let tokens: Vec<Token> = tokenize(text).into_iter().filter(|t| !t.is_trivia()).collect();
    let word = |i: usize| {
        tokens
            .get(i)
            .filter(|t| t.kind == TokenKind::Word)
            .map_or(String::new(), |t| t.text.to_ascii_lowercase())
    };
    for i in 0..tokens.len() {
        let w = word(i);
        let pieces = if matches!(w.as_str(), "exec" | "execute") && tokens.get(i + 1).is_some_and(|t| t.text == "(") {
            literals(&tokens, i + 2, |t| t.text == ")")
        } else if w == "sp_executesql" || w.ends_with(".sp_executesql") {
            // `sp_executesql [@stmt =] N'...'`, then its parameters.
            let at = if tokens.get(i + 1).is_some_and(|t| t.text.starts_with('@'))
                && tokens.get(i + 2).is_some_and(|t| t.text == "=")
            {
                i + 3
            } else {
                i + 1
            };
            literals(&tokens, at, |t| {
                t.text == "," || t.text == ";" || t.kind == TokenKind::Word && !t.text.eq_ignore_ascii_case("n")
            })
        } else {
            continue;
        };
        out.constant.extend(pieces);
    }
    out
}

/// The text of the string literals from token `at` up to one `end` holds
/// (or the end), joined, when nothing but literals, `N` prefixes and `+`
/// stands there.
fn literals(tokens: &[Token], at: usize, end: impl Fn(&Token) -> bool) -> Option<String> {
    let mut text = String::new();
    let mut any = false;
    for t in tokens.iter().skip(at) {
        if let Some(value) = t.string_value() {
            text.push_str(&value);
            any = true;
        } else if t.text == "+" || t.kind == TokenKind::Word && t.text.eq_ignore_ascii_case("n") {
            continue;
        } else if end(t) {
            break;
        } else {
            return None;
        }
    }
    any.then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_literals_alone_are_read_and_still_may_run_anything() {
        let r = run_time_sql(
            "EXEC (N'DELETE FROM fence.Resource;'); EXECUTE ('UPDATE a ' + N'SET x = ''y''') \
             EXEC sys.sp_executesql N'INSERT t VALUES (1)', N'@a int', @a = 1; EXEC sp_executesql @stmt = N'SELECT 1'",
        );
        assert_eq!(
            r.constant,
            vec![
                "DELETE FROM fence.Resource;".to_string(),
                "UPDATE a SET x = 'y'".to_string(),
                "INSERT t VALUES (1)".to_string(),
                "SELECT 1".to_string()
            ]
        );
        assert_eq!(r.arbitrary, Some("EXEC (string)"));
    }

    #[test]
    fn a_variable_or_an_expression_in_the_text_is_not_read() {
        for text in [
            "EXEC (@sql)",
            "EXEC (N'DELETE ' + @t)",
            "EXEC sp_executesql @s",
            "EXEC sys.[sp_executesql] @s",
        ] {
            let r = run_time_sql(text);
            assert!(r.constant.is_empty() && r.arbitrary.is_some(), "{text}: {r:?}");
        }
        assert_eq!(run_time_sql("EXEC @proc").arbitrary, Some("EXEC @variable"));
        assert_eq!(
            run_time_sql("EXEC sp_prepexec @h OUTPUT, NULL, N'SELECT 1'").arbitrary,
            Some("sp_prepexec")
        );
    }

    #[test]
    fn control_a_module_that_runs_no_text_runs_nothing_from_text() {
        let r = run_time_sql("CREATE PROCEDURE p WITH EXECUTE AS OWNER AS EXEC dbo.q @a = N'x'; SELECT 'EXEC (x)'");
        assert_eq!(r, RunTimeSql::default());
    }
}
