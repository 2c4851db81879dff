//! docs/ says what the shipped T-SQL does: the fence roles it names are the
//! ones permissions/ creates, every error number a procedure throws is
//! documented and every documented number is thrown, and the procedures whose
//! lock wait the contract bounds are the ones that bound it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use fencepost::schema::{FENCE_ROLES, PROCEDURE_SCHEMAS};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every file under `dir` whose name ends in `ext`, as (name, text), in name order.
fn files(dir: &str, ext: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut pending = vec![root().join(dir)];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(ext) {
                let name = path.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
                found.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    found.sort();
    found
}

/// The documents a reader is sent to: README.md and docs/*.md.
fn documents() -> Vec<(String, String)> {
    let mut docs = files("docs", ".md");
    docs.push(("README.md".into(), read("README.md")));
    docs
}

/// Every number of five digits starting with 50 that stands alone in `text`
/// (not part of a longer number or a word): an error number as documents
/// write it.
fn numbers_in(text: &str) -> BTreeSet<u32> {
    let bytes = text.as_bytes();
    let mut numbers = BTreeSet::new();
    let mut at = 0;
    while at < bytes.len() {
        let digits = bytes[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            at += 1;
            continue;
        }
        let standalone = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        if digits == 5 && standalone && text[at..].starts_with("50") {
            numbers.insert(text[at..at + 5].parse().unwrap());
        }
        at += digits;
    }
    numbers
}

/// The error numbers `text` throws: `THROW 50xxx`.
fn thrown_in(text: &str) -> BTreeSet<u32> {
    text.split("THROW ")
        .skip(1)
        .filter_map(|rest| rest.get(..5)?.parse().ok())
        .filter(|n| (50000..51000).contains(n))
        .collect()
}

/// The roles permissions/ creates (`CREATE ROLE name`).
fn created_roles() -> BTreeSet<String> {
    let mut roles = BTreeSet::new();
    for (_, text) in files("permissions", ".sql") {
        for part in text.split("CREATE ROLE ").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // A comment citing the statement's documentation names none.
            if !name.is_empty() {
                roles.insert(name);
            }
        }
    }
    roles
}

/// Each `fence_…` name a document spells in backquotes that is not a
/// procedure schema, with where.
fn named_roles() -> BTreeMap<String, String> {
    let mut named = BTreeMap::new();
    for (doc, text) in documents() {
        for span in text.split('`').skip(1).step_by(2) {
            let is_identifier = span.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            if span.starts_with("fence_") && is_identifier && !PROCEDURE_SCHEMAS.contains(&span) {
                named.entry(span.to_string()).or_insert(doc.clone());
            }
        }
    }
    named
}

#[test]
fn the_roles_the_docs_name_are_the_roles_a_deploy_creates() {
    let created = created_roles();
    assert_eq!(
        created,
        FENCE_ROLES.iter().map(|r| r.to_string()).collect::<BTreeSet<_>>(),
        "permissions/ and src/schema.rs disagree on the fence roles"
    );
    for (role, doc) in named_roles() {
        assert!(
            created.contains(&role),
            "{doc} names a fence role `{role}` no deploy creates"
        );
    }
    // A sentence that lists most of the roles lists all of them: "a grant
    // adds a user to `fence_service`, `fence_reader` or `fence_operator`"
    // left one out.
    for (doc, text) in documents() {
        for paragraph in text.split("\n\n") {
            let listed: Vec<_> = created
                .iter()
                .filter(|r| paragraph.contains(&format!("`{r}`")))
                .collect();
            assert!(
                listed.len() < 3 || listed.len() == created.len(),
                "{doc} lists {listed:?} but not every fence role of {created:?}:\n{paragraph}"
            );
        }
    }
    // "The three fence roles" in a document or a help text counts them.
    let words = ["no", "one", "two", "three", "four", "five", "six", "seven"];
    let mut texts = documents();
    texts.extend(files("src/cli", ".rs"));
    for (name, text) in texts {
        let flat = text
            .replace("///", " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for (count, word) in words.iter().enumerate() {
            for phrase in [format!("{word} fence roles"), format!("{word} roles")] {
                let said = flat.to_lowercase().contains(&phrase);
                assert!(
                    !said || count == created.len(),
                    "{name} says \"{phrase}\", but a deploy creates {} fence roles",
                    created.len()
                );
            }
        }
    }
}

#[test]
fn every_error_number_a_procedure_throws_is_documented_and_every_documented_one_is_thrown() {
    let mut thrown_by: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (file, text) in files("procedures", ".sql") {
        for number in thrown_in(&text) {
            thrown_by.entry(number).or_default().push(file.clone());
        }
    }
    assert!(
        thrown_by.contains_key(&50101),
        "no THROW found in procedures/: {thrown_by:?}"
    );
    let reference = format!("{}\n{}", read("docs/contract.md"), read("docs/callers.md"));
    let documented = numbers_in(&reference);
    for (number, files) in &thrown_by {
        assert!(
            documented.contains(number),
            "{files:?} throw {number}, which neither docs/contract.md nor docs/callers.md documents"
        );
    }
    // T-SQL the library sends of its own (the fenced transactions' batches)
    // throws numbers of its own, which client.md documents.
    let mut thrown: BTreeSet<u32> = thrown_by.keys().copied().collect();
    for (_, text) in files("src", ".rs") {
        thrown.extend(thrown_in(&text));
    }
    for (doc, text) in documents() {
        for number in numbers_in(&text) {
            assert!(
                thrown.contains(&number),
                "{doc} documents error {number}, which no procedure (nor the client's T-SQL) throws"
            );
        }
    }
}

/// The lock wait each procedure bounds, in whole seconds (`SET LOCK_TIMEOUT`
/// of 1 s or more in its body; shorter ones are its tries within that bound).
fn bounds() -> BTreeMap<String, Option<u32>> {
    files("procedures", ".sql")
        .into_iter()
        .map(|(file, text)| {
            let procedure = file
                .trim_start_matches("procedures/")
                .trim_end_matches(".sql")
                .to_string();
            let bound = text
                .split("SET LOCK_TIMEOUT ")
                .skip(1)
                .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u32>().ok())
                .filter(|ms| *ms >= 1000)
                .max()
                .map(|ms| ms / 1000);
            (procedure, bound)
        })
        .collect()
}

/// The rows of the table under `heading` in `doc`: first cell without its
/// backquotes, and the rest of the row.
fn table_rows(doc: &str, heading: &str) -> Vec<(String, String)> {
    let text = read(doc);
    let section = text
        .split(&format!("\n{heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("{doc} has no section {heading}"));
    let section = section.split("\n#").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let (first, rest) = l[2..].split_once(" | ").unwrap();
            (first.trim_matches('`').to_string(), rest.to_string())
        })
        .collect()
}

#[test]
fn the_lock_waits_the_docs_bound_are_the_ones_the_procedures_bound() {
    let bounds = bounds();
    let rows: BTreeMap<_, _> = table_rows("docs/contract.md", "## Lock waits").into_iter().collect();
    assert_eq!(
        rows.keys().collect::<BTreeSet<_>>(),
        bounds.keys().collect::<BTreeSet<_>>(),
        "docs/contract.md's Lock waits lists other procedures than procedures/ holds"
    );
    let gives_up = error_numbers_by_procedure(50129);
    for (procedure, bound) in &bounds {
        let said = &rows[procedure];
        match bound {
            Some(seconds) => {
                assert!(
                    said.starts_with(&format!("at most {seconds} s")),
                    "{procedure} waits at most {seconds} s, docs/contract.md says: {said}"
                );
                assert!(
                    gives_up.contains(procedure),
                    "{procedure} bounds its wait but does not throw 50129"
                );
            }
            None => assert!(
                !said.contains("at most"),
                "{procedure} sets no lock timeout, docs/contract.md says: {said}"
            ),
        }
    }
    // The bound as the procedure table and the caller's guide state it.
    let contract = read("docs/contract.md");
    for (procedure, seconds) in bounds.iter().filter_map(|(p, b)| Some((p, (*b)?))) {
        let row = contract
            .lines()
            .find(|l| l.starts_with(&format!("| `{procedure}` | ")))
            .unwrap_or_else(|| panic!("docs/contract.md's procedure table has no row for {procedure}"));
        for (i, _) in row.match_indices("at most ") {
            let figure: String = row[i + 8..].chars().take_while(char::is_ascii_digit).collect();
            if row[i + 8 + figure.len()..].starts_with(" s") {
                assert_eq!(
                    figure,
                    seconds.to_string(),
                    "{procedure}'s row in docs/contract.md: {row}"
                );
            }
        }
    }
    for (call, said) in table_rows("docs/callers.md", "## Engine settings") {
        for (i, _) in said.match_indices("after ") {
            let figure: String = said[i + 6..].chars().take_while(char::is_ascii_digit).collect();
            if !figure.is_empty() && said[i + 6 + figure.len()..].starts_with(" s") {
                let bounded: BTreeSet<u32> = bounds.values().flatten().copied().collect();
                assert!(
                    bounded.contains(&figure.parse().unwrap()),
                    "docs/callers.md's {call} says after {figure} s, the procedures bound at {bounded:?}"
                );
            }
        }
    }
}

/// The procedures (schema.name) whose body throws `number`.
fn error_numbers_by_procedure(number: u32) -> BTreeSet<String> {
    files("procedures", ".sql")
        .into_iter()
        .filter(|(_, text)| thrown_in(text).contains(&number))
        .map(|(file, _)| {
            file.trim_start_matches("procedures/")
                .trim_end_matches(".sql")
                .to_string()
        })
        .collect()
}

/// Where the docs show what `--version` prints, they show this build's
/// package version and the contract version it deploys.
#[test]
fn the_version_line_the_docs_show_is_the_one_the_binary_prints() {
    let printed = format!(
        "fencepost {} (procedure contract {})",
        env!("CARGO_PKG_VERSION"),
        fencepost::client::CONTRACT_VERSION
    );
    let mut shown = 0;
    for (file, text) in documents() {
        for (at, _) in text.match_indices("(procedure contract ") {
            let start = text[..at]
                .rfind("fencepost ")
                .expect("a version line starts with `fencepost `");
            let end = at + text[at..].find(')').unwrap() + 1;
            assert_eq!(
                &text[start..end],
                printed,
                "{file} shows another version line than the binary prints"
            );
            shown += 1;
        }
    }
    assert!(shown > 0, "no document shows the version line");
}
