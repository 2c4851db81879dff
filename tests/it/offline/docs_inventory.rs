//! docs/operating.md lists every object a deploy creates, read from the
//! shipped T-SQL (migrations/ in order, procedures/, permissions/, and the
//! runner's own history table), and names for each `lease` command the
//! procedure it calls and exactly the roles permissions/ grants it to.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use fencepost::schema::HISTORY_TABLE;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `.sql` files under `dir`, as (file name, text), in name order.
fn sql_files(dir: &str) -> Vec<(String, String)> {
    let mut files: Vec<_> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// The text with `--` comments removed: a comment that quotes a statement
/// creates nothing.
fn code(sql: &str) -> String {
    sql.lines()
        .map(|l| l.split("--").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The name after each `keyword` in `sql`.
fn names_after<'a>(sql: &'a str, keyword: &str) -> Vec<&'a str> {
    sql.split(keyword)
        .skip(1)
        .filter_map(|rest| {
            let name = rest.split(|c: char| c.is_whitespace() || c == '(' || c == ';').next()?;
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// What a deploy leaves in the database, by kind: schemas, tables (created
/// and not dropped by a later migration), indexes, procedures, roles.
fn created() -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut migrations = sql_files("migrations");
    let version = |name: &str| -> u32 { name[1..name.find("__").unwrap()].parse().unwrap() };
    migrations.sort_by_key(|(name, _)| version(name));
    let mut schemas = BTreeSet::from(["fence".to_string()]);
    let mut tables = BTreeSet::from([HISTORY_TABLE.to_string()]);
    let mut indexes = BTreeSet::new();
    for (_, text) in &migrations {
        let text = code(text);
        schemas.extend(names_after(&text, "CREATE SCHEMA ").into_iter().map(String::from));
        // Within a migration a table is dropped before it is created again.
        for dropped in names_after(&text, "DROP TABLE ") {
            tables.remove(dropped);
        }
        tables.extend(names_after(&text, "CREATE TABLE ").into_iter().map(String::from));
        indexes.extend(names_after(&text, "CREATE INDEX ").into_iter().map(String::from));
    }
    let procedures = sql_files("procedures")
        .into_iter()
        .map(|(name, _)| name.trim_end_matches(".sql").to_string())
        .collect();
    let roles = sql_files("permissions")
        .iter()
        .flat_map(|(_, text)| {
            names_after(&code(text), "CREATE ROLE ")
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    BTreeMap::from([
        ("schema", schemas),
        ("table", tables),
        ("index", indexes),
        ("procedure", procedures),
        ("role", roles),
    ])
}

/// The rows of the table under `heading` in docs/operating.md, as cells.
fn table(heading: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join("docs/operating.md")).unwrap();
    let section = text
        .split(&format!("\n{heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("docs/operating.md has no section {heading}"));
    section
        .split("\n#")
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| kind") && !l.starts_with("| command"))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .collect()
}

/// The backquoted spans of `cell`.
fn quoted(cell: &str) -> BTreeSet<String> {
    cell.split('`').skip(1).step_by(2).map(String::from).collect()
}

#[test]
fn the_inventory_lists_every_object_a_deploy_creates_and_nothing_else() {
    let listed: BTreeMap<String, BTreeSet<String>> = table("## What a deploy creates")
        .into_iter()
        .map(|row| (row[0].clone(), quoted(&row[1])))
        .collect();
    for (kind, objects) in created() {
        assert!(objects.len() > 1 || kind == "index", "read no {kind}: {objects:?}");
        let row = listed
            .get(kind)
            .unwrap_or_else(|| panic!("docs/operating.md's inventory has no row for {kind}"));
        // A row may quote other things (an owner, a table an index is on);
        // every object is there, and every object-shaped name is one.
        for object in &objects {
            assert!(row.contains(object), "the inventory's {kind} row leaves out {object}");
        }
        let shaped = |name: &&String| match kind {
            "table" => name.starts_with("fence."),
            "procedure" => name.starts_with("fence_api.") || name.starts_with("fence_admin."),
            "role" | "schema" => name.starts_with("fence"),
            _ => name.starts_with("IX_"),
        };
        for name in row.iter().filter(shaped) {
            assert!(
                objects.contains(name),
                "the inventory's {kind} row lists {name}, which no deploy creates"
            );
        }
    }
}

#[test]
fn each_lease_command_names_the_roles_granted_its_procedure() {
    let mut granted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, text) in sql_files("permissions") {
        for grant in code(&text).split("GRANT EXECUTE ON ").skip(1) {
            let mut words = grant.split_whitespace();
            let procedure = words.next().unwrap().to_string();
            assert_eq!(words.next(), Some("TO"), "GRANT EXECUTE ON {procedure} ...");
            let role = words.next().unwrap().trim_end_matches([';', '\'']);
            granted.entry(procedure).or_default().insert(role.to_string());
        }
    }
    let rows: Vec<_> = table("## What each command needs")
        .into_iter()
        .filter(|row| row[0].starts_with("`lease "))
        .collect();
    // docs/cli.md is the binary's own help (offline::cli_reference holds it
    // to that), so its headings are the lease commands there are.
    let commands: BTreeSet<String> = std::fs::read_to_string(root().join("docs/cli.md"))
        .expect("docs/cli.md")
        .lines()
        .filter_map(|line| line.strip_prefix("## `fencepost lease ")?.strip_suffix('`'))
        .map(|name| format!("`lease {name}`"))
        .collect();
    let documented: BTreeSet<String> = rows.iter().map(|row| row[0].clone()).collect();
    assert_eq!(documented, commands, "one row per lease command: {rows:?}");
    for row in rows {
        let cell = &row[1];
        // "`fence_operator` or `fence_recovery` (`fence_admin.ListLeases`)":
        // the roles before the parenthesis, the procedure in it.
        let (roles, rest) = cell.split_once(" (`").unwrap_or_else(|| panic!("{cell}"));
        let procedure = rest.split('`').next().unwrap();
        let roles = quoted(roles);
        let expected = granted
            .get(procedure)
            .unwrap_or_else(|| panic!("{} names {procedure}, which nothing is granted", row[0]));
        assert_eq!(&roles, expected, "{}: the roles granted EXECUTE on {procedure}", row[0]);
    }
}
