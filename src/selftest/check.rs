//! A check: a behaviour, the document it follows, what that document
//! expects, and the schedule that shows whether the engine does it.

use futures_util::future::BoxFuture;

use super::context::Context;
use super::report::Status;

/// One check of the selftest.
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) behaviour: &'static str,
    pub(crate) document: &'static str,
    /// What the document expects, unless the verdict names the answer that
    /// holds under the settings in effect.
    pub(crate) expected: &'static str,
    pub(crate) run: for<'a> fn(&'a Context) -> BoxFuture<'a, anyhow::Result<Verdict>>,
}

/// How a schedule ended.
pub(crate) struct Verdict {
    pub(crate) status: Status,
    pub(crate) seen: String,
    /// The expectation under the settings in effect, when it differs from
    /// the check's own.
    pub(crate) expected: Option<String>,
}

impl Verdict {
    /// Passed when `held`, failed otherwise; `seen` says what the engine answered.
    pub(crate) fn judge(held: bool, seen: impl Into<String>) -> Verdict {
        Verdict {
            status: if held { Status::Passed } else { Status::Failed },
            seen: seen.into(),
            expected: None,
        }
    }

    /// Not run, and why.
    pub(crate) fn skipped(reason: impl Into<String>) -> Verdict {
        Verdict {
            status: Status::Skipped,
            seen: reason.into(),
            expected: None,
        }
    }

    /// The expectation that holds under the settings in effect.
    pub(crate) fn expecting(mut self, expected: impl Into<String>) -> Verdict {
        self.expected = Some(expected.into());
        self
    }
}
