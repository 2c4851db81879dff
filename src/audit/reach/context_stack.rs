//! Whom a module's statements may run as, by its own EXECUTE AS statements
//! ("EXECUTE AS (Transact-SQL)"): EXECUTE AS CALLER, USER or LOGIN switches
//! the context, the switches stack, and "REVERT (Transact-SQL)" returns to
//! the context before the last one. Read leniently: every part a context
//! MAY run is its own. A switch counts wherever it stands, even under IF
//! (it may run); a REVERT counts only where it surely runs, a statement of
//! its own (after `;` or END, or first) in no block but plain BEGIN ... END
//! ones (an IF, a WHILE or a TRY may pass it by, and WITH NO REVERT keeps
//! the switch). A switch in a loop may run before the loop's earlier
//! statements on the next turn, so those count too. A text with GOTO may
//! jump anywhere: each context it switches to may run the whole body.

use super::super::module_text::header_as;
use crate::tsql::{TokenKind, keywords_in_place, tokenize};

/// A context an EXECUTE AS statement switches to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum As {
    Caller,
    /// `USER = 'x'`, or `None` when the name is not a literal.
    User(Option<String>),
    Login,
}

/// The byte ranges of `text` that may run as `who`.
pub(super) fn may_run_as(text: &str, who: impl Fn(&As) -> bool) -> Vec<(usize, usize)> {
    spans(text)
        .into_iter()
        .filter(|(_, _, a)| who(a))
        .map(|(f, t, _)| (f, t))
        .collect()
}

/// `text` with only `ranges` kept, everything else blanked in place.
pub(super) fn kept(text: &str, ranges: &[(usize, usize)]) -> String {
    text.char_indices()
        .map(|(i, c)| {
            if ranges.iter().any(|&(f, t)| f <= i && i < t) {
                c.to_string()
            } else {
                " ".repeat(c.len_utf8())
            }
        })
        .collect()
}

/// A BEGIN ... END (or CASE ... END) block open at some point.
struct Block {
    start: usize,
    /// Its statements surely run once reached: a BEGIN standing as a
    /// statement of its own, not a TRY or CATCH.
    plain: bool,
    /// A WHILE's body, which may run again.
    looped: bool,
}

/// Each part of `text` that runs switched, with the context it may run as.
fn spans(text: &str) -> Vec<(usize, usize, As)> {
    let body = header_as(&keywords_in_place(text).to_ascii_lowercase()).map_or(0, |at| at + 2);
    let tokens: Vec<_> = tokenize(text)
        .into_iter()
        .filter(|t| t.start >= body)
        .filter(|t| {
            !matches!(
                t.kind,
                TokenKind::Whitespace | TokenKind::LineComment | TokenKind::BlockComment
            )
        })
        .collect();
    let word = |i: usize| {
        tokens
            .get(i)
            .filter(|t| t.kind == TokenKind::Word)
            .map_or(String::new(), |t| t.text.to_ascii_lowercase())
    };
    let block_ends = block_ends(&tokens, &word);
    // An END that closes a CASE expression ends no statement: `IF @x = CASE
    // ... END REVERT` runs the REVERT only when the test holds.
    let sure_start = |i: usize| {
        i == 0
            || tokens[i - 1].text == ";"
            || word(i - 1) == "end" && block_ends.contains(&(i - 1))
            || word(i - 1) == "begin" && !matches!(word(i).as_str(), "tran" | "transaction")
    };
    let mut out = Vec::new();
    let mut goto = false;
    let mut broken = false;
    let mut blocks: Vec<Block> = Vec::new();
    // The switches in force: the context, whether WITH NO REVERT pins it,
    // and where its current span starts.
    let mut stack: Vec<(As, bool, usize)> = Vec::new();
    let mut in_while = false;
    let mut i = 0;
    while i < tokens.len() {
        let at = tokens[i].start;
        if sure_start(i) {
            in_while = false;
        }
        match word(i).as_str() {
            "goto" => goto = true,
            "while" => in_while = true,
            "begin"
                if !matches!(
                    word(i + 1).as_str(),
                    "tran" | "transaction" | "distributed" | "dialog" | "conversation"
                ) =>
            {
                let plain = sure_start(i) && !matches!(word(i + 1).as_str(), "try" | "catch");
                blocks.push(Block {
                    start: at,
                    plain,
                    looped: in_while,
                });
                in_while = false;
            }
            "case" => blocks.push(Block {
                start: at,
                plain: false,
                looped: false,
            }),
            "end" => broken |= blocks.pop().is_none(),
            "execute" | "exec" if word(i + 1) == "as" => {
                let who = match word(i + 2).as_str() {
                    "caller" => As::Caller,
                    "user" => As::User(literal(&tokens, i + 4)),
                    "login" => As::Login,
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                // After the target: `= [N]'name'` for USER and LOGIN.
                let mut j = i + 3;
                if who != As::Caller {
                    j += 1;
                    if word(j) == "n" {
                        j += 1;
                    }
                    j += 1;
                }
                let pinned = word(j) == "with" && word(j + 1) == "no" && word(j + 2) == "revert";
                // In a loop, what comes before the switch in the loop may
                // run after it on the next turn.
                let from = blocks.iter().find(|b| b.looped).map_or(at, |b| b.start.min(at));
                if let Some((top, _, start)) = stack.last() {
                    out.push((*start, at, top.clone()));
                }
                stack.push((who, pinned, from));
                i = if pinned { j + 3 } else { j };
                continue;
            }
            "revert" => {
                let sure = sure_start(i) && !broken && blocks.iter().all(|b| b.plain);
                if sure && stack.last().is_some_and(|(_, pinned, _)| !pinned) {
                    let (who, _, start) = stack.pop().unwrap_or((As::Login, false, at));
                    out.push((start, at, who));
                    if let Some(top) = stack.last_mut() {
                        top.2 = at;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    if let Some((top, _, start)) = stack.last() {
        out.push((*start, text.len(), top.clone()));
    }
    if goto {
        for s in &mut out {
            *s = (body, text.len(), s.2.clone());
        }
    }
    out.retain(|(f, t, _)| f < t);
    out
}

/// The tokens that are an END closing a BEGIN block, not a CASE
/// expression (nor END CONVERSATION, a statement of its own).
fn block_ends(tokens: &[crate::tsql::Token], word: &impl Fn(usize) -> String) -> Vec<usize> {
    let mut open: Vec<bool> = Vec::new();
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        match word(i).as_str() {
            "begin"
                if !matches!(
                    word(i + 1).as_str(),
                    "tran" | "transaction" | "distributed" | "dialog" | "conversation"
                ) =>
            {
                open.push(false)
            }
            "case" => open.push(true),
            "end" if word(i + 1) != "conversation" => out.extend((open.pop() == Some(false)).then_some(i)),
            _ => {}
        }
    }
    out
}

/// The name a string literal at token `i` (or after an `N` there) holds.
fn literal(tokens: &[crate::tsql::Token], i: usize) -> Option<String> {
    let i = if tokens.get(i)?.text.eq_ignore_ascii_case("n") {
        i + 1
    } else {
        i
    };
    tokens.get(i)?.string_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS ";

    /// The text of `body` that may run as the caller, squeezed.
    fn caller(body: &str) -> String {
        let text = format!("{HEAD}{body}");
        let part = kept(&text, &may_run_as(&text, |a| *a == As::Caller));
        part.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn user(body: &str, name: &str) -> String {
        let text = format!("{HEAD}{body}");
        let part = kept(&text, &may_run_as(&text, |a| *a == As::User(Some(name.into()))));
        part.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn a_switch_runs_to_its_revert() {
        assert_eq!(
            caller("SELECT 1; EXECUTE AS CALLER; UPDATE t SET x = 1; REVERT; DELETE u;"),
            "EXECUTE AS CALLER; UPDATE t SET x = 1;"
        );
    }

    #[test]
    fn no_semicolons_are_needed_and_an_unsure_revert_pops_nothing() {
        assert_eq!(
            caller("SET NOCOUNT ON EXECUTE AS CALLER UPDATE t SET x = 1 REVERT DELETE u"),
            "EXECUTE AS CALLER UPDATE t SET x = 1 REVERT DELETE u"
        );
    }

    #[test]
    fn a_plain_begin_end_around_the_switch_and_its_revert() {
        assert_eq!(
            caller("BEGIN EXECUTE AS CALLER; UPDATE t SET x = 1; REVERT; DELETE u; END"),
            "EXECUTE AS CALLER; UPDATE t SET x = 1;"
        );
    }

    #[test]
    fn nested_switches_return_to_the_caller_at_their_revert() {
        assert_eq!(
            caller("EXECUTE AS CALLER; EXECUTE AS USER = 'h'; SELECT 1; REVERT; UPDATE t SET x = 1; REVERT; DELETE u;"),
            "EXECUTE AS CALLER; REVERT; UPDATE t SET x = 1;"
        );
        assert_eq!(
            user(
                "EXECUTE AS CALLER; EXECUTE AS USER = N'h'; SELECT 1; REVERT; UPDATE t SET x = 1; REVERT;",
                "h"
            ),
            "EXECUTE AS USER = N'h'; SELECT 1;"
        );
    }

    #[test]
    fn a_conditional_revert_may_not_run() {
        assert_eq!(
            caller("EXECUTE AS CALLER; IF @x = 1 REVERT; UPDATE t SET x = 1;"),
            "EXECUTE AS CALLER; IF @x = 1 REVERT; UPDATE t SET x = 1;"
        );
        assert_eq!(
            caller("EXECUTE AS CALLER; IF @x = 1 BEGIN REVERT; END UPDATE t SET x = 1;"),
            "EXECUTE AS CALLER; IF @x = 1 BEGIN REVERT; END UPDATE t SET x = 1;"
        );
        assert_eq!(
            caller("EXECUTE AS CALLER; BEGIN TRY REVERT; END TRY BEGIN CATCH UPDATE t SET x = 1; END CATCH"),
            "EXECUTE AS CALLER; BEGIN TRY REVERT; END TRY BEGIN CATCH UPDATE t SET x = 1; END CATCH"
        );
    }

    #[test]
    fn an_if_or_while_test_ending_in_a_case_expression_is_no_statement_of_its_own() {
        assert_eq!(
            caller("EXECUTE AS CALLER; IF @x = CASE WHEN @y = 1 THEN 1 ELSE 0 END REVERT; UPDATE t SET x = 1;"),
            "EXECUTE AS CALLER; IF @x = CASE WHEN @y = 1 THEN 1 ELSE 0 END REVERT; UPDATE t SET x = 1;"
        );
        assert_eq!(
            caller("WHILE @i < CASE WHEN @n > 2 THEN 2 ELSE @n END BEGIN UPDATE t SET x = 1; EXECUTE AS CALLER; END"),
            "BEGIN UPDATE t SET x = 1; EXECUTE AS CALLER; END"
        );
        // Control: a BEGIN block's END ends a statement.
        assert_eq!(
            caller("EXECUTE AS CALLER; BEGIN SELECT CASE WHEN @y = 1 THEN 1 END; END REVERT; UPDATE t SET x = 1;"),
            "EXECUTE AS CALLER; BEGIN SELECT CASE WHEN @y = 1 THEN 1 END; END"
        );
    }

    #[test]
    fn a_conditional_switch_may_run() {
        assert_eq!(
            caller("IF @x = 1 EXECUTE AS CALLER; UPDATE t SET x = 1; REVERT; DELETE u;"),
            "EXECUTE AS CALLER; UPDATE t SET x = 1;"
        );
    }

    #[test]
    fn a_switch_in_a_loop_may_run_before_the_loops_earlier_statements() {
        assert_eq!(
            caller("SELECT 1; WHILE @i < 2 BEGIN UPDATE t SET x = 1; EXECUTE AS CALLER; END"),
            "BEGIN UPDATE t SET x = 1; EXECUTE AS CALLER; END"
        );
    }

    #[test]
    fn with_no_revert_keeps_the_switch() {
        assert_eq!(
            caller("EXECUTE AS CALLER WITH NO REVERT; REVERT; UPDATE t SET x = 1;"),
            "EXECUTE AS CALLER WITH NO REVERT; REVERT; UPDATE t SET x = 1;"
        );
    }

    #[test]
    fn with_goto_each_switch_may_run_the_whole_body() {
        assert_eq!(
            caller("GOTO l; EXECUTE AS CALLER; REVERT; l: UPDATE t SET x = 1;"),
            "GOTO l; EXECUTE AS CALLER; REVERT; l: UPDATE t SET x = 1;"
        );
        assert_eq!(caller("GOTO l; l: UPDATE t SET x = 1;"), "");
    }

    #[test]
    fn control_the_header_a_string_and_a_comment_switch_nothing() {
        let text = "CREATE PROCEDURE p WITH EXECUTE AS CALLER AS SELECT 'EXECUTE AS CALLER'; \
                    /* EXECUTE AS CALLER */ -- EXEC AS USER = 'h'\nUPDATE t SET x = 1;";
        assert!(spans(text).is_empty(), "{:?}", spans(text));
    }

    #[test]
    fn a_switch_to_a_user_is_that_users_alone() {
        let body = "EXECUTE AS USER = 'writer'; SELECT 1; REVERT; UPDATE t SET x = 1;";
        assert_eq!(user(body, "writer"), "EXECUTE AS USER = 'writer'; SELECT 1;");
        assert_eq!(user(body, "other"), "");
        assert_eq!(caller(body), "");
    }
}
