//! What a rule reports: a finding (the fence is open) or a rule it could not
//! verify (the catalog does not show enough to tell).

use serde::{Deserialize, Serialize};

use super::Rule;

/// One way past the fence, with the statement that closes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Finding {
    /// The rule that found it.
    pub rule: Rule,
    /// The principal who can get past the fence, when it is about one.
    pub principal: Option<String>,
    /// The object, schema, database or module it is about.
    pub object: String,
    /// The permission, membership or construct at fault.
    pub permission: Option<String>,
    /// Why it breaks the fence.
    pub why: String,
    /// The statement (or step) that would close it.
    pub fix: String,
}

/// A rule whose answer the catalog cannot give, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CannotVerify {
    /// The rule.
    pub rule: Rule,
    /// What the catalog lacks.
    pub reason: String,
}
