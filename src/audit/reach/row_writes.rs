//! The permissions a module's statements use to change rows, read from its
//! words: what [`super::lent_names::Statements`] keeps for each module and
//! what the walk asks of a callee's text.

use std::collections::BTreeSet;

use super::super::module_text::words;
use crate::tsql::code_only;

/// The permissions `text` uses to change rows, in the order a path names
/// them: TRUNCATE TABLE, ALTER TABLE ... SWITCH (which moves a table's rows
/// to another) and DROP TABLE need ALTER on the table (DROP: through its
/// schema, or CONTROL, each of which implies it). In doubt a word counts:
/// `UPDATE` anywhere in the code, or in `constants`, the texts it runs from
/// string literals ([`super::run_time_sql`]), is an UPDATE.
pub(super) fn written(text: &str, constants: &[String]) -> Vec<&'static str> {
    let mut words: Vec<String> = words(&code_only(text));
    for run in constants {
        words.push(";".into());
        words.extend(super::super::module_text::words(&code_only(run)));
    }
    let drops = words.windows(2).any(|w| w[0] == "drop" && w[1] == "table");
    let words: BTreeSet<String> = words.into_iter().collect();
    let has = |w: &[&str]| w.iter().any(|w| words.contains(*w));
    let merge = has(&["merge"]);
    // "OUTPUT Clause": `OUTPUT ... INTO table` inserts into that table.
    let output_into = has(&["output"]) && has(&["into"]);
    [
        ("UPDATE", merge || has(&["update", "updatetext", "writetext"])),
        ("INSERT", merge || output_into || has(&["insert"])),
        ("DELETE", merge || has(&["delete"])),
        ("ALTER", drops || has(&["truncate", "switch"])),
    ]
    .into_iter()
    .filter(|(_, used)| *used)
    .map(|(p, _)| p)
    .collect()
}
