//! The selftest's keys: one fixed key per check under the reserved root
//! ([`KEY_ROOT`], then the user's `--key-prefix`), reused run after run, so a login that may not delete leaves the same rows
//! after any number of runs. Every key a run touches is noted, so the
//! clean-up names exactly those keys instead of scanning the tables by
//! prefix.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// The start of every key a selftest makes, whatever `--key-prefix` says:
/// the user's prefix follows it, so a selftest key is never one of the
/// user's own keys (whose generation a run would advance and whose row its
/// clean-up would delete, restarting the generation at 1).
pub const KEY_ROOT: &str = "fencepost-selftest:";

/// Every payload the selftest publishes holds this, then the run's id: a
/// key under the root whose publication lacks it is not the selftest's, and
/// the run neither uses nor deletes it.
pub(crate) const RUN_MARKER: &str = "(fencepost selftest run ";

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
    /// The keys under [`KEY_ROOT`] followed by `user_prefix`.
    pub(crate) fn new(user_prefix: &str) -> Keys {
        Keys {
            prefix: format!("{KEY_ROOT}{user_prefix}"),
            run: Uuid::new_v4().simple().to_string()[..12].to_string(),
            used: Arc::default(),
        }
    }

    /// The prefix every key starts with.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key `<root><user prefix><name>`, the same in every run; noted
    /// for the clean-up.
    pub(crate) fn key(&self, name: &str) -> String {
        let key = self.name(name);
        self.note(&key);
        key
    }

    /// The key `<root><user prefix><name>`, not noted: for a key the run
    /// may yet refuse as not its own.
    pub(crate) fn name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Notes `key` for the clean-up.
    pub(crate) fn note(&self, key: &str) {
        if let Ok(mut used) = self.used.lock() {
            // A key past the bound is still used; the clean-up names it as
            // not deleted, so nothing is lost silently.
            used.insert(key.to_string());
        }
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
        format!("{text} {RUN_MARKER}{})", self.run)
    }

    /// Whether a published `payload` is one a selftest wrote.
    pub(crate) fn is_selftests(payload: &str) -> bool {
        payload.contains(RUN_MARKER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_gets_the_same_key_in_every_run_and_each_key_is_noted_once() {
        let one = Keys::new("");
        let two = Keys::new("");
        assert_eq!(one.key("handover"), two.key("handover"));
        assert_ne!(one.run, two.run);
        one.key("handover");
        one.key("cut");
        assert_eq!(one.used(), ["fencepost-selftest:cut", "fencepost-selftest:handover"]);
        assert_ne!(one.payload("from B"), two.payload("from B"));
        assert!(Keys::is_selftests(&one.payload("from B")));
        assert!(!Keys::is_selftests("from B"));
    }

    #[test]
    fn a_user_prefix_nests_under_the_root_and_is_never_the_key_itself() {
        let keys = Keys::new("orders:");
        assert_eq!(keys.name("handover"), "fencepost-selftest:orders:handover");
        assert_eq!(keys.prefix(), "fencepost-selftest:orders:");
        assert!(keys.used().is_empty(), "a name alone is not noted");
    }
}
