//! What the engine does with the fence tables' rows besides what the
//! procedures do: copies of them, and predicates that filter or block them.

use serde::{Deserialize, Serialize};

/// One fence table and one engine feature that acts on its rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceTableFeature {
    /// `schema.name` of the fence table.
    pub table: String,
    /// What acts on it.
    pub feature: TableFeature,
}

/// The features that copy or filter a table's rows outside its own grants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TableFeature {
    /// `SYSTEM_VERSIONING = ON`: every old row version lands in `history`,
    /// a table of its own with grants of its own.
    SystemVersioned {
        /// `schema.name` of the history table.
        history: String,
    },
    /// Change data capture: every change is copied to a `cdc` change table.
    ChangeDataCapture,
    /// Published for replication: rows are copied to subscribers.
    Replicated,
    /// A security policy binds a filter or block predicate to the table: a
    /// function of someone else's sees every row, and can hide or refuse the
    /// procedures' reads and writes.
    SecurityPolicy {
        /// `schema.name` of the policy.
        policy: String,
    },
}
