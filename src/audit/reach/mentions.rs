//! What an object may name, answered without reading its text: the chains of
//! [`super::writers`] ask whether each object names each target, and reading
//! a module's text for every pair of a long chain is what made it slow.
//!
//! A module's text names a plain name (letters, digits, `_`, `@`, `#`, `$`)
//! only where the name stands as a run of such characters in its code, and
//! that run is in the text as written too: taking out comments and the
//! inside of strings leaves a space or a quote where they were, which no
//! such name spans, and brackets and quotes go in both. So a text that does
//! not hold the name, lower-cased, does not name it, and the full reading is
//! kept for the texts that do.

use std::collections::{HashMap, HashSet};

use super::super::catalog::{Catalog, Object};
use super::super::module_text::normalized;

pub(super) struct Mentions {
    /// Each object's text, normalized, by its lower-cased `schema.name`:
    /// every text of that name, one a line.
    texts: HashMap<String, String>,
    /// The recorded dependencies, `(referencing, referenced)` lower-cased.
    recorded: HashSet<(String, String)>,
}

impl Mentions {
    pub(super) fn new(catalog: &Catalog) -> Mentions {
        let mut texts: HashMap<String, String> = HashMap::new();
        for o in &catalog.objects {
            if let Some(d) = o.definition.as_deref() {
                let text = texts.entry(o.qualified_name().to_ascii_lowercase()).or_default();
                text.push_str(&normalized(d));
                text.push('\n');
            }
        }
        let recorded = catalog
            .dependencies
            .iter()
            .flatten()
            .map(|d| (d.referencing.to_ascii_lowercase(), d.referenced.to_ascii_lowercase()))
            .collect();
        Mentions { texts, recorded }
    }

    /// Whether `o`'s dependencies, as recorded, name `target`.
    pub(super) fn recorded(&self, o: &Object, target: &str) -> bool {
        self.recorded
            .contains(&(o.qualified_name().to_ascii_lowercase(), target.to_ascii_lowercase()))
    }

    /// Whether `o`'s text may name `target` (`schema.name`): false only
    /// when it certainly does not. A name of other characters is always
    /// read in full: its quoting and case folding are the reader's to judge.
    pub(super) fn may_name(&self, o: &Object, target: &str) -> bool {
        let name = target.split_once('.').map_or(target, |(_, n)| n);
        let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_@#$".contains(&b));
        !plain
            || self
                .texts
                .get(&o.qualified_name().to_ascii_lowercase())
                .is_some_and(|text| text.contains(&name.to_ascii_lowercase()))
    }
}
