//! EXECUTE AS CALLER inside a module ("EXECUTE AS (Transact-SQL)"): in a
//! module WITH EXECUTE AS, it switches back to the module's caller, and the
//! statements after it run as the caller until REVERT. Only what surely
//! runs so is left out of what the module lends: the statements from an
//! EXECUTE AS CALLER that is itself a statement of the module's outer
//! block (no IF, WHILE or BEGIN around it) up to the first REVERT, or up to
//! the outer block's statement holding that REVERT (a loop may run what
//! comes before it again after it). Switches stack ("REVERT
//! (Transact-SQL)" returns to the context before the last one): a switch
//! that is a statement of the outer block is undone by the next such
//! REVERT, and the caller's statements go on after it; any other switch
//! ends them. A text with GOTO is read whole: a jump may pass the switch
//! by. What MAY run as the caller, the part the module makes with its
//! caller's rights, is read leniently ([`super::context_stack`]).

use std::borrow::Cow;

use super::super::module_text::header_as;
use super::context_stack::{As, kept, may_run_as};
use crate::tsql::keywords_in_place;

/// Whether `text` may switch back to its caller somewhere.
pub(super) fn has_caller_region(text: &str) -> bool {
    !caller_ranges(text).is_empty()
}

/// `text` with the statements that run as the caller blanked.
pub(super) fn lent_part(text: &str) -> Cow<'_, str> {
    let regions = regions(text);
    if regions.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (from, to) in regions {
        out.push_str(&text[at..from]);
        out.push_str(&" ".repeat(to - from));
        at = to;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// `text` with only the statements that may run as the caller kept: what
/// the module makes with its caller's rights.
pub(super) fn caller_part(text: &str) -> String {
    kept(text, &caller_ranges(text))
}

fn caller_ranges(text: &str) -> Vec<(usize, usize)> {
    may_run_as(text, |a| *a == As::Caller)
}

/// Words (lower-cased) and semicolons, with where each starts.
fn tokens(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in code.char_indices().chain(std::iter::once((code.len(), ' '))) {
        let word = c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '$');
        match (word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, code[s..i].to_ascii_lowercase()));
                start = None;
            }
            _ => {}
        }
        if c == ';' {
            out.push((i, ";".to_string()));
        }
    }
    out
}

/// The byte ranges of `text` that surely run as the caller.
fn regions(text: &str) -> Vec<(usize, usize)> {
    let code = keywords_in_place(text);
    let tokens = tokens(&code);
    if tokens.iter().any(|(_, w)| w == "goto") {
        return Vec::new();
    }
    let body = header_as(&code.to_ascii_lowercase()).map_or(0, |at| at + 2);
    let word = |i: usize| tokens.get(i).map_or("", |(_, w)| w.as_str());
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut i = tokens.iter().position(|(at, _)| *at >= body).unwrap_or(tokens.len());
    let first = i;
    while i < tokens.len() {
        let starts = i == first || word(i - 1) == ";";
        if depth == 0
            && starts
            && matches!(word(i), "execute" | "exec")
            && word(i + 1) == "as"
            && word(i + 2) == "caller"
        {
            let from = tokens[i].0;
            let mut end = text.len();
            let mut block = None;
            // The switches made since, each a statement of the outer block.
            let mut nested = 0;
            let mut j = i + 3;
            while j < tokens.len() {
                match step(&tokens, j, &mut depth) {
                    Err(()) => return Vec::new(),
                    Ok(true) if block.is_none() => block = Some(tokens[j].0),
                    _ => {}
                }
                let switch = matches!(word(j), "execute" | "exec") && word(j + 1) == "as";
                let switch = switch && matches!(word(j + 2), "caller" | "user" | "login");
                if switch || word(j) == "revert" {
                    let outer = depth == 0 && word(j - 1) == ";";
                    if outer && switch {
                        nested += 1;
                    } else if outer && nested > 0 {
                        nested -= 1;
                    } else {
                        end = if depth == 0 {
                            tokens[j].0
                        } else {
                            block.unwrap_or(tokens[j].0)
                        };
                        break;
                    }
                }
                if depth == 0 {
                    block = None;
                }
                j += 1;
            }
            out.push((from, end));
            // Scanning goes on at the REVERT (or the block holding it),
            // from the outer block.
            depth = 0;
            i = tokens.iter().position(|(at, _)| *at >= end).unwrap_or(tokens.len());
            continue;
        }
        if step(&tokens, i, &mut depth).is_err() {
            return Vec::new();
        }
        i += 1;
    }
    out
}

/// Counts the blocks token `i` opens or closes; `Ok(true)` when it opens
/// one from the outer block, `Err` when the count goes wrong.
fn step(tokens: &[(usize, String)], i: usize, depth: &mut i32) -> Result<bool, ()> {
    let next = tokens.get(i + 1).map_or("", |(_, w)| w.as_str());
    match tokens[i].1.as_str() {
        "begin" if !matches!(next, "tran" | "transaction" | "distributed" | "dialog" | "conversation") => {
            *depth += 1;
            Ok(*depth == 1)
        }
        "case" => {
            *depth += 1;
            Ok(*depth == 1)
        }
        "end" => {
            *depth -= 1;
            if *depth < 0 { Err(()) } else { Ok(false) }
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS ";

    fn lent(body: &str) -> String {
        lent_part(&format!("{HEAD}{body}")).to_lowercase()
    }

    #[test]
    fn statements_from_the_switch_to_revert_run_as_the_caller() {
        let t = lent("EXECUTE AS CALLER; UPDATE fence.Resource SET x = 1; REVERT; DELETE fence.Lease;");
        assert!(!t.contains("update"), "{t}");
        assert!(t.contains("delete fence.lease"), "{t}");
        assert!(t.contains("execute as 'maint'"), "{t}");
    }

    #[test]
    fn the_caller_part_is_the_switched_statements_alone() {
        let t = caller_part(&format!(
            "{HEAD}SELECT 1; EXECUTE AS CALLER; UPDATE fence.Resource SET x = 1; REVERT; DELETE fence.Lease;"
        ))
        .to_lowercase();
        assert!(t.contains("update fence.resource"), "{t}");
        assert!(
            !t.contains("delete") && !t.contains("select") && !t.contains("maint"),
            "{t}"
        );
    }

    #[test]
    fn statements_before_the_switch_stay_lent() {
        let t = lent("UPDATE fence.Resource SET x = 1; EXECUTE AS CALLER; SELECT 1;");
        assert!(t.contains("update fence.resource"), "{t}");
    }

    #[test]
    fn control_a_switch_under_if_is_not_sure_to_run() {
        let t = lent("IF @x = 1 EXECUTE AS CALLER; UPDATE fence.Resource SET x = 1;");
        assert!(t.contains("update fence.resource"), "{t}");
        let t = lent("IF @x = 1 BEGIN EXECUTE AS CALLER; END UPDATE fence.Resource SET x = 1;");
        assert!(t.contains("update fence.resource"), "{t}");
    }

    #[test]
    fn control_a_revert_inside_a_loop_ends_the_switch_before_the_loop() {
        let t = lent("EXECUTE AS CALLER; WHILE @i < 2 BEGIN UPDATE fence.Resource SET x = 1; REVERT; END");
        assert!(t.contains("update fence.resource"), "{t}");
    }

    #[test]
    fn a_nested_switch_reverted_in_the_outer_block_keeps_the_caller_region() {
        let t = lent(
            "EXECUTE AS CALLER; EXECUTE AS USER = 'h'; REVERT; UPDATE fence.Resource SET x = 1; REVERT; DELETE fence.Lease;",
        );
        assert!(!t.contains("update"), "{t}");
        assert!(t.contains("delete fence.lease"), "{t}");
    }

    #[test]
    fn control_a_nested_switch_in_a_block_or_under_if_ends_the_caller_region() {
        let t = lent(
            "EXECUTE AS CALLER; IF @x = 1 BEGIN EXECUTE AS USER = 'h'; END REVERT; UPDATE fence.Resource SET x = 1; REVERT;",
        );
        assert!(t.contains("update fence.resource"), "{t}");
        let t = lent(
            "EXECUTE AS CALLER; IF @x = 1 EXECUTE AS USER = 'h'; REVERT; UPDATE fence.Resource SET x = 1; REVERT;",
        );
        assert!(t.contains("update fence.resource"), "{t}");
    }

    #[test]
    fn the_caller_part_may_be_in_a_block_without_semicolons() {
        let t = caller_part(&format!(
            "{HEAD}BEGIN EXECUTE AS CALLER UPDATE fence.Resource SET x = 1 END"
        ))
        .to_lowercase();
        assert!(t.contains("update fence.resource"), "{t}");
        assert!(has_caller_region(&format!(
            "{HEAD}IF @x = 1 BEGIN EXECUTE AS CALLER; END"
        )));
    }

    #[test]
    fn control_goto_may_jump_past_the_switch() {
        let t = lent("GOTO l; EXECUTE AS CALLER; l: UPDATE fence.Resource SET x = 1;");
        assert!(t.contains("update fence.resource"), "{t}");
    }

    #[test]
    fn control_a_header_clause_and_a_string_are_no_switch() {
        let t = lent("SELECT 'x; EXECUTE AS CALLER;'; UPDATE fence.Resource SET x = 1;");
        assert!(t.contains("update fence.resource"), "{t}");
        let text = "CREATE PROCEDURE ops.Fix WITH EXECUTE AS CALLER AS UPDATE fence.Resource SET x = 1;";
        assert!(!has_caller_region(text));
    }
}
