//! The selftest's keys: one fixed key per check under the reserved prefix,
//! reused run after run, so a login that may not delete leaves the same rows
//! after any number of runs. Every key a run touches is noted, so the
//! clean-up names exactly those keys instead of scanning the tables by
//! prefix.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// The most keys a run may note: every check's keys, with room to spare.
/// The clean-up sends one parameter per key, so this bounds it.
pub(crate) const MAX_KEYS: usize = 64;

/// The keys of a run, and the run's id (for what must differ between runs:
/// the scratch database's name and the payloads a check compares).
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
    /// This run's id.
    pub(crate) run: String,
    used: Arc<Mutex<BTreeSet<String>>>,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_string(),
            run: Uuid::new_v4().simple().to_string()[..12].to_string(),
            used: Arc::default(),
        }
    }

    /// The prefix every key starts with.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key `<prefix><name>`, the same in every run; noted for the clean-up.
    pub(crate) fn key(&self, name: &str) -> String {
        let key = format!("{}{name}", self.prefix);
        if let Ok(mut used) = self.used.lock() {
            // A key past the bound is still used; the clean-up names it as
            // not deleted, so nothing is lost silently.
            used.insert(key.clone());
        }
        key
    }

    /// Every key the run touched, in order.
    pub(crate) fn used(&self) -> Vec<String> {
        self.used
            .lock()
            .map(|u| u.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A payload of this run: a check compares what stands with what it
    /// wrote, never with what an earlier run left under the same key.
    pub(crate) fn payload(&self, text: &str) -> String {
        format!("{text} (run {})", self.run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_gets_the_same_key_in_every_run_and_each_key_is_noted_once() {
        let one = Keys::new("fencepost-selftest:");
        let two = Keys::new("fencepost-selftest:");
        assert_eq!(one.key("handover"), two.key("handover"));
        assert_ne!(one.run, two.run);
        one.key("handover");
        one.key("cut");
        assert_eq!(one.used(), ["fencepost-selftest:cut", "fencepost-selftest:handover"]);
        assert_ne!(one.payload("from B"), two.payload("from B"));
    }
}
