//! What a module's text names and runs, read the way the audit needs it:
//! comments never count, string literals count only where dynamic SQL could
//! run them, and identifiers compare without their brackets or quotes.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::tsql::{code_only, without_comments};

/// `c` as a lenient collation compares it, pushed onto `out`: its
/// compatibility decomposition (a full-width letter is its ASCII form)
/// without combining marks (an accented letter is its plain one), lower
/// cased; the letters with a stroke, the dotless i and the ligatures that
/// Windows collations expand or ignore the stroke of, as their plain
/// letters; and characters a collation gives no weight (a soft hyphen,
/// zero-width spaces and joiners) left out. SQL Server compares identifiers
/// by the database's collation ("Database Identifiers"): a Windows collation
/// without `_WS` ignores width, one with `_AI` ignores accents, a Turkish
/// one lower-cases I to a dotless i. Read more leniently than the database
/// reads, a spelling of a fence table is not missed for any of these (at
/// worst a name the database tells apart is taken for it).
fn push_folded(out: &mut String, c: char) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    for d in std::iter::once(c).nfkd().filter(|d| !is_combining_mark(*d)) {
        match d {
            '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{34f}' => {}
            'ı' => out.push('i'),
            'ß' | 'ẞ' => out.push_str("ss"),
            'æ' | 'Æ' => out.push_str("ae"),
            'œ' | 'Œ' => out.push_str("oe"),
            'ø' | 'Ø' => out.push('o'),
            'đ' | 'Đ' => out.push('d'),
            'ł' | 'Ł' => out.push('l'),
            'ħ' | 'Ħ' => out.push('h'),
            d => out.extend(d.to_lowercase()),
        }
    }
}

/// `name` folded as [`push_folded`] folds each character.
pub(crate) fn folded(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        push_folded(&mut out, c);
    }
    out
}

/// Whether two identifiers may name one object: equal once folded.
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b) || folded(a) == folded(b)
}

/// Folded text ([`push_folded`]) with brackets and double quotes removed
/// and no spaces around dots, so `[fence] . [Resource]` and
/// `fence.resource` read alike.
pub(crate) fn normalized(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    for c in sql.chars().filter(|c| !matches!(c, '[' | ']' | '"')) {
        if c == '.' {
            while out.ends_with(char::is_whitespace) {
                out.pop();
            }
        }
        if c.is_whitespace() && out.ends_with('.') {
            continue;
        }
        push_folded(&mut out, c);
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '$')
}

/// Whether `needle` (already normalized) occurs in `haystack` as whole words.
pub(crate) fn contains_words(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + needle.len()..].chars().next();
        !before.is_some_and(is_ident_char) && !after.is_some_and(is_ident_char)
    })
}

/// Whether a module's text names `schema.name`, in code or inside a string
/// that dynamic SQL could run.
#[cfg(test)]
pub(crate) fn references(definition: &str, schema: &str, name: &str) -> bool {
    let text = normalized(&without_comments(definition));
    let needle = normalized(&format!("{schema}.{name}"));
    contains_words(&text, &needle)
}

/// Which of `tables` (names in `schema`) a module's text names, read once.
pub(crate) fn referenced_tables<'t>(
    definition: &str,
    schema: &str,
    tables: impl IntoIterator<Item = &'t String>,
) -> Vec<&'t String> {
    let text = normalized(&without_comments(definition));
    tables
        .into_iter()
        .filter(|t| contains_words(&text, &normalized(&format!("{schema}.{t}"))))
        .collect()
}

/// Whether a module's text names `name` by one part (not after or before a
/// dot): inside a module SQL Server resolves such a name against the
/// module's own schema first, then dbo. Strings do not count: SQL built at
/// run time resolves a one-part name against the caller's default schema,
/// not the module's. A word right after AS is a column or table alias
/// ("SELECT - column_alias"), never an object, except after the AS that
/// ends the module's header.
pub(crate) fn names_unqualified(definition: &str, name: &str) -> bool {
    names_unqualified_in(&normalized(&code_only(definition)), name)
}

/// [`names_unqualified`] over code already [`normalized`], so that a long
/// text is read once for many names.
pub(crate) fn names_unqualified_in(text: &str, name: &str) -> bool {
    let needle = normalized(name);
    let header = header_as(text);
    text.match_indices(&needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        let edge = |c: Option<char>| !c.is_some_and(|c| is_ident_char(c) || c == '.');
        edge(before) && edge(after) && !word_before(text, at).is_some_and(|(p, w)| w == "as" && Some(p) != header)
    })
}

/// The procedure names a module's code runs by EXECUTE with no schema
/// (`EXEC p`, `EXEC @rc = p`, `EXEC db..p`), lower-cased. SQL Server
/// resolves such a name when the module runs, in the default schema of the
/// caller or of the EXECUTE AS user, then dbo ("Qualifying Names Inside
/// Stored Procedures"), and users can change their own default schema
/// ("ALTER USER"): the name may mean a procedure of that name in any schema.
pub(crate) fn executed_unqualified(definition: &str) -> Vec<String> {
    let words = words(&normalized(&code_only(definition)));
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w != "exec" && w != "execute" {
            continue;
        }
        let mut at = i + 1;
        if words.get(at).is_some_and(|n| n.starts_with('@')) && words.get(at + 1).is_some_and(|n| n == "=") {
            at += 2;
        }
        let Some(name) = words.get(at) else { continue };
        // `db..p` leaves the schema out as a one-part name does.
        let name = name.rsplit_once("..").map_or(name.as_str(), |(_, n)| n);
        let starts_a_name = name.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_');
        if starts_a_name && !name.contains('.') && name != "as" && !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// The tables a module's code names by one part as the object of a DDL
/// statement that changes their rows or their definition (`TRUNCATE TABLE
/// t`, `ALTER TABLE t`, `DROP TABLE t`, every table of `DROP TABLE a, b`),
/// lower-cased. SQL Server resolves such a name when the statement runs, in
/// the default schema of the caller or of the EXECUTE AS user, then dbo
/// ("Qualifying Names Inside Stored Procedures"), not in the module's own
/// schema. `db..t` names no schema either ("Transact-SQL Syntax
/// Conventions": an omitted schema is the default one), so in `database`,
/// the module's own, it is read as `t`.
pub(crate) fn ddl_unqualified(definition: &str, database: &str) -> Vec<String> {
    let words = words(&normalized(&code_only(definition)));
    let here = format!("{}..", normalized(database));
    let mut out: Vec<String> = Vec::new();
    for (i, verb) in words.iter().enumerate() {
        if !matches!(verb.as_str(), "truncate" | "alter" | "drop") || words.get(i + 1).is_none_or(|w| w != "table") {
            continue;
        }
        // `DROP TABLE IF EXISTS t`.
        let mut at = if words.get(i + 2).is_some_and(|w| w == "if") {
            i + 4
        } else {
            i + 2
        };
        while let Some(name) = words.get(at) {
            let name = name.strip_prefix(&here).unwrap_or(name);
            let starts_a_name = name.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_');
            if starts_a_name && !name.contains('.') && !out.iter().any(|o| o == name) {
                out.push(name.to_string());
            }
            // Only DROP TABLE takes a list.
            if verb != "drop" || words.get(at + 1).is_none_or(|w| w != ",") {
                break;
            }
            at += 2;
        }
    }
    out
}

/// The word that ends just before `at` in `text`, and where it starts.
fn word_before(text: &str, at: usize) -> Option<(usize, &str)> {
    let head = text[..at].trim_end();
    let start = head
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_ident_char(*c))
        .last()
        .map(|(i, _)| i)?;
    Some((start, &head[start..]))
}

/// Where the AS that ends a module's header (`CREATE PROCEDURE p @a AS int
/// WITH EXECUTE AS OWNER AS ...`) starts in normalized code: the first AS
/// outside parentheses after CREATE that neither follows EXECUTE nor types
/// a parameter.
pub(crate) fn header_as(text: &str) -> Option<usize> {
    let create = text
        .match_indices("create")
        .find(|(at, _)| is_word_at(text, *at, "create".len()))?
        .0;
    let mut depth = 0i32;
    let mut from = create;
    for (at, _) in text[create..].match_indices("as").map(|(i, m)| (create + i, m)) {
        depth += text[from..at]
            .chars()
            .map(|c| (c == '(') as i32 - (c == ')') as i32)
            .sum::<i32>();
        from = at;
        if depth != 0 || !is_word_at(text, at, 2) {
            continue;
        }
        match word_before(text, at) {
            Some((_, w)) if w == "execute" || w == "exec" || w.starts_with('@') => continue,
            _ => return Some(at),
        }
    }
    None
}

fn is_word_at(text: &str, at: usize, len: usize) -> bool {
    let before = text[..at].chars().next_back();
    let after = text[at + len..].chars().next();
    !before.is_some_and(is_ident_char) && !after.is_some_and(is_ident_char)
}

/// The constructs in a module's text that run SQL built at run time or run as
/// someone else: both step outside what the catalog can show about it.
pub(crate) fn dynamic_constructs(definition: &str) -> Vec<&'static str> {
    let words = words(&code_only(definition));
    let mut found = Vec::new();
    let mut push = |what: &'static str| {
        if !found.contains(&what) {
            found.push(what);
        }
    };
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).map(String::as_str);
        if w == "sp_executesql" || w.ends_with(".sp_executesql") {
            push("sp_executesql");
        }
        // The API procedures that prepare and run a statement from text.
        for api in [
            "sp_prepexec",
            "sp_prepare",
            "sp_prepexecrpc",
            "sp_cursorprepexec",
            "sp_cursoropen",
        ] {
            if *w == api || w.ends_with(&format!(".{api}")) {
                push("sp_prepexec");
            }
        }
        match w.as_str() {
            "exec" | "execute" => match next {
                Some("(") => push("EXEC (string)"),
                Some("as") => push("EXECUTE AS"),
                Some(n) if n.starts_with('@') && words.get(i + 2).map(String::as_str) != Some("=") => {
                    push("EXEC @variable")
                }
                // EXEC @rc = @proc: the procedure's name is a variable too.
                Some(n)
                    if n.starts_with('@')
                        && words.get(i + 2).map(String::as_str) == Some("=")
                        && words.get(i + 3).is_some_and(|p| p.starts_with('@')) =>
                {
                    push("EXEC @variable")
                }
                _ => {}
            },
            _ => {}
        }
    }
    found
}

/// Whether a module's text may change data itself: a data statement
/// (INSERT, UPDATE, DELETE, MERGE, TRUNCATE, the text-column writes), DDL
/// that takes a table's rows (SWITCH, DROP TABLE of a permanent table), or SQL
/// built at run time or run as someone else. A text with none of them only
/// reads what it names. In doubt it may: a string or an identifier that
/// spells one of those words counts too.
pub(crate) fn may_modify_data(definition: &str) -> bool {
    const WRITES: [&str; 7] = [
        "insert",
        "update",
        "delete",
        "merge",
        "truncate",
        "writetext",
        "updatetext",
    ];
    let words = words(&code_only(definition));
    words.iter().any(|w| WRITES.contains(&w.as_str()))
        || moves_rows_by_ddl(&words)
        || !dynamic_constructs(definition).is_empty()
}

/// Whether `words` hold DDL that takes a table's rows with it: `ALTER
/// TABLE ... SWITCH` ("ALTER TABLE": moves the rows out) or a `DROP TABLE`
/// of a table that is not a temporary one.
fn moves_rows_by_ddl(words: &[String]) -> bool {
    words.iter().any(|w| w == "switch")
        || (0..words.len()).any(|i| {
            let mut at = i + 2;
            if words.get(at).is_some_and(|w| w == "if") {
                at += 2;
            }
            words[i] == "drop"
                && words.get(i + 1).is_some_and(|w| w == "table")
                && words.get(at).is_none_or(|name| !name.starts_with('#'))
        })
}

/// Whether running a module may change data: its own text may
/// ([`may_modify_data`]), or it runs another module (EXEC), which
/// ownership chaining lets write unchecked when both have one owner
/// ("Ownership Chains").
pub(crate) fn may_write(definition: &str) -> bool {
    may_modify_data(definition)
        || words(&code_only(definition))
            .iter()
            .any(|w| w == "exec" || w == "execute")
}

/// Lower-cased words and single punctuation characters of code, brackets
/// and quotes dropped, so `EXEC(` and `EXEC (` read alike.
pub(crate) fn words(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in code.chars() {
        if matches!(c, '[' | ']' | '"') {
            continue;
        }
        if is_ident_char(c) || c == '.' {
            push_folded(&mut current, c);
            continue;
        }
        if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ddl_statements_one_part_table_is_read_but_not_a_qualified_one() {
        let d = "CREATE PROCEDURE p AS TRUNCATE TABLE [Resource]; ALTER TABLE fence.Tenure NOCHECK CONSTRAINT ALL;
            DROP TABLE IF EXISTS Scratch; -- DROP TABLE Hidden
            SELECT 'ALTER TABLE Quoted'";
        assert_eq!(ddl_unqualified(d, "orders"), ["resource", "scratch"]);
    }

    #[test]
    fn every_table_of_a_drop_list_and_a_name_of_this_database_without_a_schema_are_read() {
        let d = "DROP TABLE IF EXISTS fence.Tenure, [Scratch] , Resource; TRUNCATE TABLE [Orders]..Holder;
            ALTER TABLE archive..Lease ADD x int; TRUNCATE TABLE Orders.dbo.Audit";
        assert_eq!(ddl_unqualified(d, "orders"), ["scratch", "resource", "holder"]);
    }

    #[test]
    fn comments_hide_references_but_strings_do_not() {
        assert!(!references("-- UPDATE fence.Resource\nSELECT 1", "fence", "Resource"));
        assert!(!references(
            "/* outer /* inner */ fence.Resource */ SELECT 1",
            "fence",
            "Resource"
        ));
        assert!(references(
            "EXEC (N'UPDATE fence.Resource SET Generation = 0')",
            "fence",
            "Resource"
        ));
        assert!(references("UPDATE [fence] . [Resource] SET x = 1", "fence", "Resource"));
        assert!(references("update FENCE.RESOURCE set x = 1", "fence", "Resource"));
        assert!(references("SELECT * FROM otherdb.fence.Resource", "fence", "Resource"));
    }

    #[test]
    fn a_longer_name_is_not_a_reference() {
        assert!(!references("SELECT * FROM fence.ResourceArchive", "fence", "Resource"));
        assert!(!references("SELECT * FROM myfence.Resource", "fence", "Resource"));
    }

    #[test]
    fn a_string_holding_a_comment_marker_does_not_start_a_comment() {
        let sql = "SELECT N'--'; UPDATE fence.Resource SET x = 1";
        assert!(references(sql, "fence", "Resource"));
    }

    #[test]
    fn dynamic_sql_and_execute_as_are_found_in_code_only() {
        assert_eq!(dynamic_constructs("EXEC (@sql)"), ["EXEC (string)"]);
        assert_eq!(dynamic_constructs("EXECUTE sys.sp_executesql @s"), ["sp_executesql"]);
        assert_eq!(
            dynamic_constructs("CREATE PROCEDURE p WITH EXECUTE AS OWNER AS SELECT 1"),
            ["EXECUTE AS"]
        );
        assert_eq!(dynamic_constructs("EXEC @proc"), ["EXEC @variable"]);
        assert!(dynamic_constructs("EXEC @rc = dbo.p").is_empty());
        assert!(dynamic_constructs("THROW 50000, N'do not EXECUTE AS or EXEC (x)', 1; -- EXEC (x)").is_empty());
        assert!(dynamic_constructs("EXEC dbo.p @a = 1").is_empty());
    }

    #[test]
    fn a_word_after_as_is_an_alias_unless_the_header_ends_there() {
        let proc =
            "CREATE PROCEDURE dbo.p @k AS int WITH EXECUTE AS OWNER AS SELECT COUNT(*) AS Leases FROM dbo.Orders AS o";
        assert!(!names_unqualified(proc, "Leases"));
        assert!(!names_unqualified(proc, "o"));
        assert!(names_unqualified(
            "CREATE PROCEDURE dbo.p AS UPDATE Leases SET x = 1",
            "Leases"
        ));
        assert!(names_unqualified(
            "CREATE VIEW dbo.v (a) AS SELECT CAST(1 AS int) AS a FROM Leases",
            "Leases"
        ));
    }

    #[test]
    fn one_part_execute_names_are_read() {
        assert_eq!(
            executed_unqualified(
                "CREATE PROCEDURE dbo.p AS EXEC ForceRelease @k = 1; EXEC @rc = [Other]; EXEC orders..Third"
            ),
            ["forcerelease", "other", "third"]
        );
        assert!(
            executed_unqualified("EXEC dbo.p; EXECUTE AS USER = 'x'; EXEC (@sql); EXEC @p; EXEC @rc = fence_admin.q")
                .is_empty()
        );
        assert!(executed_unqualified("SELECT N'EXEC ForceRelease'").is_empty());
    }

    #[test]
    fn a_switch_or_a_drop_of_a_permanent_table_may_modify_data_and_a_temporary_drop_does_not() {
        for text in [
            "CREATE PROCEDURE p AS ALTER TABLE fence.Resource SWITCH TO ops.Old;",
            "CREATE PROCEDURE p AS DROP TABLE fence.Resource;",
            "CREATE PROCEDURE p AS DROP TABLE IF EXISTS fence.Resource;",
        ] {
            assert!(may_modify_data(text), "{text}");
        }
        for text in [
            "CREATE PROCEDURE p AS DROP TABLE #t;",
            "CREATE PROCEDURE p AS DROP TABLE IF EXISTS #t; SELECT 1;",
        ] {
            assert!(!may_modify_data(text), "{text}");
        }
    }
}
