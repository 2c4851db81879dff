//! What a migration's statements do, as far as the rights they take go: the
//! kinds of statement in its code and in the dynamic SQL it runs through
//! EXEC. The deploy's rights are derived from these kinds rather than listed
//! by hand, and a statement of a kind not known here is reported as such, so
//! that a new migration cannot quietly need a right the check never asks for.

use std::collections::BTreeSet;

use crate::tsql::{Token, TokenKind, tokenize};

/// A kind of statement a migration runs, by the rights SQL Server's
/// documentation says it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Statement {
    /// `CREATE SCHEMA ... AUTHORIZATION dbo`: CREATE SCHEMA, and IMPERSONATE
    /// on the owner named.
    CreateSchema,
    /// `CREATE TABLE`: CREATE TABLE on the database and ALTER on the schema.
    CreateTable,
    /// `SELECT ... INTO table`: as CREATE TABLE, and SELECT on the source.
    SelectInto,
    /// `CREATE INDEX`, `DROP INDEX`: ALTER on the table.
    Index,
    /// `ALTER TABLE` (columns, constraints): ALTER on the table.
    AlterTable,
    /// `DROP TABLE`: ALTER on the schema.
    DropTable,
    /// A foreign key (`REFERENCES`): REFERENCES on the table it names.
    ForeignKey,
    /// `SELECT`: SELECT on what it reads.
    Select,
    /// `INSERT`: INSERT on the table, which dbo owns, not the deployer.
    Insert,
    /// `UPDATE`: UPDATE (and SELECT, for its predicate) on the table.
    Update,
    /// `DELETE`: DELETE (and SELECT) on the table.
    Delete,
}

/// The statement kinds in some T-SQL, and the statements of kinds this
/// module does not know (as written, e.g. `CREATE VIEW`, `EXEC sp_rename`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Statements {
    pub known: BTreeSet<Statement>,
    pub unknown: Vec<String>,
}

impl Statements {
    /// The kinds in `sql`, with those of the dynamic SQL it EXECs.
    pub(crate) fn of(sql: &str) -> Self {
        let mut found = Self::default();
        found.read(sql);
        found
    }

    fn read(&mut self, sql: &str) {
        let tokens: Vec<Token<'_>> = tokenize(sql).into_iter().filter(|t| !t.is_trivia()).collect();
        let word = |i: usize, keyword: &str| tokens.get(i).is_some_and(|t| t.is_keyword(keyword));
        for (i, token) in tokens.iter().enumerate() {
            if token.kind != TokenKind::Word {
                continue;
            }
            let verb = token.text.to_ascii_uppercase();
            let after = i.checked_sub(1).map(|p| tokens[p].text.to_ascii_uppercase());
            match verb.as_str() {
                "CREATE" => {
                    // CREATE [UNIQUE] [CLUSTERED | NONCLUSTERED] INDEX
                    let mut next = i + 1;
                    while ["UNIQUE", "CLUSTERED", "NONCLUSTERED"].iter().any(|k| word(next, k)) {
                        next += 1;
                    }
                    if word(next, "SCHEMA") {
                        self.known.insert(Statement::CreateSchema);
                    } else if word(next, "TABLE") {
                        self.known.insert(Statement::CreateTable);
                    } else if word(next, "INDEX") {
                        self.known.insert(Statement::Index);
                    } else {
                        self.unknown.push(format!("CREATE {}", text(&tokens, next)));
                    }
                }
                "ALTER" if word(i + 1, "TABLE") => {
                    self.known.insert(Statement::AlterTable);
                }
                "ALTER" => self.unknown.push(format!("ALTER {}", text(&tokens, i + 1))),
                // ALTER TABLE ... DROP CONSTRAINT | COLUMN is the ALTER TABLE.
                "DROP" if word(i + 1, "CONSTRAINT") || word(i + 1, "COLUMN") => {}
                "DROP" if word(i + 1, "TABLE") => {
                    self.known.insert(Statement::DropTable);
                }
                "DROP" if word(i + 1, "INDEX") => {
                    self.known.insert(Statement::Index);
                }
                "DROP" => self.unknown.push(format!("DROP {}", text(&tokens, i + 1))),
                "REFERENCES" => {
                    self.known.insert(Statement::ForeignKey);
                }
                // A foreign key's ON UPDATE / ON DELETE action.
                "UPDATE" | "DELETE" if after.as_deref() == Some("ON") => {}
                "UPDATE" if word(i + 1, "STATISTICS") => self.unknown.push("UPDATE STATISTICS".into()),
                "UPDATE" => {
                    self.known.insert(Statement::Update);
                }
                "DELETE" => {
                    self.known.insert(Statement::Delete);
                }
                "INSERT" => {
                    self.known.insert(Statement::Insert);
                }
                "SELECT" => {
                    self.known.insert(Statement::Select);
                }
                // INTO after anything but INSERT (or MERGE) is SELECT ... INTO.
                "INTO" if !matches!(after.as_deref(), Some("INSERT" | "MERGE")) => {
                    self.known.insert(Statement::SelectInto);
                }
                "EXEC" | "EXECUTE" => self.read_exec(&tokens, i),
                "MERGE" | "TRUNCATE" | "GRANT" | "DENY" | "REVOKE" | "BULK" | "DBCC" => {
                    self.unknown.push(verb);
                }
                "SET" if word(i + 1, "IDENTITY_INSERT") => self.unknown.push("SET IDENTITY_INSERT".into()),
                "DISABLE" | "ENABLE" if word(i + 1, "TRIGGER") => self.unknown.push(format!("{verb} TRIGGER")),
                _ => {}
            }
        }
    }

    /// `EXEC (N'...')` runs the text, read for its own statements (literals
    /// joined with `+` as one text); EXEC of a procedure is a statement of a
    /// kind not known here, and so is text built at run time (a variable, a
    /// function): what it runs cannot be read, so it is named by what it is
    /// built from, and its literal parts are read all the same.
    fn read_exec(&mut self, tokens: &[Token<'_>], at: usize) {
        let Some(next) = tokens.get(at + 1) else {
            return;
        };
        if next.text != "(" {
            self.unknown.push(format!("EXEC {}", next.text));
            return;
        }
        // Up to the ')' that closes this EXEC's '(', past those of a CAST.
        let mut depth = 0usize;
        let inside: Vec<&Token<'_>> = tokens[at + 2..]
            .iter()
            .take_while(|t| match t.text {
                "(" => {
                    depth += 1;
                    true
                }
                ")" if depth == 0 => false,
                ")" => {
                    depth -= 1;
                    true
                }
                _ => true,
            })
            .collect();
        let literal = |t: &Token<'_>| t.kind == TokenKind::StringLiteral && t.text.len() >= 2;
        let mut text = String::new();
        for token in inside.iter().filter(|t| literal(t)) {
            text += &token.text[1..token.text.len() - 1].replace("''", "'");
        }
        // `N` before a quote is the literal's prefix (a separate token here).
        let written_out = |t: &Token<'_>| literal(t) || t.text == "+" || t.text.eq_ignore_ascii_case("N");
        if let Some(built_from) = inside.iter().find(|t| !written_out(t)) {
            self.unknown
                .push(format!("EXEC of SQL built at run time ({})", built_from.text));
        }
        self.read(&text);
    }
}

fn text(tokens: &[Token<'_>], i: usize) -> String {
    tokens.get(i).map(|t| t.text.to_ascii_uppercase()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Statement::*;

    #[test]
    fn every_kind_is_found_in_code_and_in_the_dynamic_sql_it_execs_but_not_in_comments_or_strings() {
        let found = Statements::of(
            "-- INSERT in a comment, DELETE too
SELECT * INTO fence.Copy FROM fence.Resource;
INSERT INTO fence.Anchor (Singleton) VALUES (1);
UPDATE fence.Resource SET LockCount = 0;
IF 1 = 1 EXEC (N'ALTER TABLE fence.A ADD CONSTRAINT FK FOREIGN KEY (K) REFERENCES fence.B (K) ON DELETE CASCADE;');
CREATE UNIQUE NONCLUSTERED INDEX IX ON fence.A (K);
ALTER TABLE fence.A DROP CONSTRAINT CK;
DROP TABLE fence.Copy;
THROW 50000, N'cannot DELETE or MERGE', 1;",
        );
        assert_eq!(
            found.known,
            BTreeSet::from([
                SelectInto, Select, Insert, Update, AlterTable, ForeignKey, Index, DropTable
            ])
        );
        assert!(found.unknown.is_empty(), "{:?}", found.unknown);
    }

    /// Dynamic SQL built at run time cannot be read for its statements: it
    /// is named as unknown, so a migration that runs it fails the guard.
    #[test]
    fn dynamic_sql_not_written_out_and_disable_trigger_are_named() {
        let found = Statements::of(
            "DECLARE @sql nvarchar(max) = N'DELETE FROM fence.A';
EXEC (@sql);
EXECUTE (N'UPDATE fence.A SET K = ' + CAST(@x AS nvarchar(10)) + N' WHERE 1 = 0');
DISABLE TRIGGER fence.T ON fence.A;
ENABLE TRIGGER fence.T ON fence.A;",
        );
        assert_eq!(
            found.unknown,
            [
                "EXEC of SQL built at run time (@sql)",
                "EXEC of SQL built at run time (CAST)",
                "DISABLE TRIGGER",
                "ENABLE TRIGGER"
            ]
        );
        // The literal parts are read all the same, past the ')' of CAST.
        assert!(found.known.contains(&Update), "{found:?}");
        // Literals joined with + are written out: read, and not unknown.
        let found = Statements::of("EXEC (N'INSERT INTO fence.A (K) ' + N'VALUES (1)');");
        assert!(found.unknown.is_empty(), "{found:?}");
        assert!(found.known.contains(&Insert), "{found:?}");
    }

    #[test]
    fn a_statement_of_a_kind_not_known_here_is_named() {
        let found = Statements::of(
            "CREATE VIEW fence.V AS SELECT 1 AS One;
EXEC sp_rename N'fence.A', N'B';
MERGE fence.A AS t USING fence.B AS s ON 1 = 0 WHEN NOT MATCHED THEN INSERT (K) VALUES (s.K);
EXEC (N'TRUNCATE TABLE fence.A');
ALTER SCHEMA fence TRANSFER dbo.X;",
        );
        assert_eq!(
            found.unknown,
            ["CREATE VIEW", "EXEC sp_rename", "MERGE", "TRUNCATE", "ALTER SCHEMA"]
        );
        // MERGE's INSERT is an insert; MERGE itself stays unknown.
        assert!(found.known.contains(&Insert));
    }
}
