//! Foreign keys and their referential actions: a DELETE or UPDATE on the
//! referenced table that cascades writes the referencing table's rows, and
//! SQL Server checks no permission on the referencing table for it.

use serde::{Deserialize, Serialize};

/// One foreign key (`sys.foreign_keys`), from the referencing table to the
/// referenced one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKey {
    /// The constraint's name.
    pub name: String,
    /// `schema.name` of the referencing table: the one the constraint is on,
    /// whose rows a cascade writes.
    pub table: String,
    /// `schema.name` of the referenced table, whose DELETE or UPDATE
    /// cascades.
    pub referenced: String,
    /// The referenced columns (`sys.foreign_key_columns`): only an UPDATE of
    /// one of them changes a key the referencing rows point to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub referenced_columns: Vec<String>,
    /// `ON DELETE` (`delete_referential_action`).
    #[serde(default)]
    pub on_delete: ReferentialAction,
    /// `ON UPDATE` (`update_referential_action`).
    #[serde(default)]
    pub on_update: ReferentialAction,
}

/// What a delete or update of a referenced key does to the referencing rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferentialAction {
    /// The statement fails while referencing rows exist: nothing is written.
    #[default]
    NoAction,
    /// The referencing rows are deleted or their keys updated with it.
    Cascade,
    /// The referencing rows' key columns are set to NULL.
    SetNull,
    /// The referencing rows' key columns are set to their defaults.
    SetDefault,
}

impl ReferentialAction {
    /// The action as `sys.foreign_keys` numbers it (0 to 3); `None` for a
    /// number it does not use.
    pub fn from_code(code: i32) -> Option<Self> {
        match code {
            0 => Some(Self::NoAction),
            1 => Some(Self::Cascade),
            2 => Some(Self::SetNull),
            3 => Some(Self::SetDefault),
            _ => None,
        }
    }

    /// Whether the action writes the referencing rows.
    pub fn writes(self) -> bool {
        self != Self::NoAction
    }

    /// The clause as T-SQL spells it.
    pub fn clause(self) -> &'static str {
        match self {
            Self::NoAction => "NO ACTION",
            Self::Cascade => "CASCADE",
            Self::SetNull => "SET NULL",
            Self::SetDefault => "SET DEFAULT",
        }
    }
}

impl ForeignKey {
    /// The statements on the referenced table that write the referencing
    /// rows through this key, with the clause that makes them: `DELETE`
    /// with `ON DELETE CASCADE`, `UPDATE` with `ON UPDATE SET NULL`.
    pub fn writing_statements(&self) -> Vec<(&'static str, String)> {
        [("DELETE", self.on_delete), ("UPDATE", self.on_update)]
            .into_iter()
            .filter(|(_, a)| a.writes())
            .map(|(s, a)| (s, format!("ON {s} {}", a.clause())))
            .collect()
    }
}
