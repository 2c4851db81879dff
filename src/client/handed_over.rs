//! Which keys this client's guards let go of a moment ago. A worker that
//! releases a key and at once waits for it again is the newcomer most
//! likely to race the head its release woke (see `queue`), so its wait joins
//! the queue with its first attempt; a wait for a key this client did not
//! just hand over asks plainly first, as a holder without a guard wakes no
//! head to race. Only a signal raised counts: a guard let go of before its
//! signal was up woke no one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// How long after a guard let go of a key's signal a wait for that key
/// counts as coming back: well past the release's reply, which is when a
/// worker that comes back asks, and far shorter than any lease.
const LATELY: Duration = Duration::from_millis(100);

/// How many keys are kept before those let go of longer ago than
/// [`LATELY`] are forgotten, so a client holding many guards keeps a few.
const FORGET_AT: usize = 256;

/// The signals let go of lately, by name, and when.
#[derive(Debug, Default)]
pub(crate) struct HandedOver {
    recent: Mutex<HashMap<Arc<str>, Instant>>,
}

impl HandedOver {
    /// The signal named `resource` was let go of now.
    pub(crate) fn record(&self, resource: &Arc<str>) {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if recent.len() >= FORGET_AT {
            recent.retain(|_, at| now.saturating_duration_since(*at) < LATELY);
        }
        recent.insert(resource.clone(), now);
    }

    /// Whether the signal named `resource` was let go of within [`LATELY`].
    pub(crate) fn lately(&self, resource: &str) -> bool {
        let recent = self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        recent.get(resource).is_some_and(|at| at.elapsed() < LATELY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_signal_counts_as_let_go_of_lately_for_a_moment_only() {
        let handed = HandedOver::default();
        let name: Arc<str> = "fencepost:lease:aa".into();
        assert!(!handed.lately(&name), "never let go of");
        handed.record(&name);
        assert!(handed.lately(&name));
        assert!(!handed.lately("fencepost:lease:bb"), "another key");
        tokio::time::advance(LATELY).await;
        assert!(!handed.lately(&name), "let go of too long ago");
    }

    #[tokio::test(start_paused = true)]
    async fn many_keys_let_go_of_long_ago_are_forgotten() {
        let handed = HandedOver::default();
        for i in 0..FORGET_AT {
            handed.record(&Arc::from(format!("fencepost:lease:{i}")));
        }
        tokio::time::advance(LATELY).await;
        handed.record(&Arc::from("fencepost:lease:new"));
        assert_eq!(handed.recent.lock().unwrap().len(), 1);
    }
}
