//! The code of the database: tables, modules (T-SQL and CLR), synonyms and
//! DDL triggers, and the deploy runner's journal of what it deployed.

use serde::{Deserialize, Serialize};

use super::execute_as::{ExecuteAs, execute_as};

/// A table, module, synonym or database DDL trigger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// Schema name; empty for a database DDL trigger, which has none.
    pub schema: String,
    /// Object name.
    pub name: String,
    /// What it is.
    pub kind: ObjectKind,
    /// The owner when set on the object itself; `None` means the schema owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// For a trigger, the `schema.name` of the table it fires on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The module's text (`sys.sql_modules.definition`), or a synonym's base
    /// object; `None` when hidden (encrypted, or no VIEW DEFINITION) or when
    /// the module is compiled CLR code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    /// The server's hash of `definition`, computed as the deploy runner
    /// computes the hash it records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_hash: Option<String>,
    /// The principal named by `WITH EXECUTE AS`, when there is one (`OWNER`
    /// for EXECUTE AS OWNER; CALLER is `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute_as: Option<String>,
    /// Whether `execute_as` is a principal's name as it is, never a keyword:
    /// a user may be called Owner (`EXECUTE AS 'Owner'`), and only
    /// `execute_as_principal_id` -2 is EXECUTE AS OWNER. The reader marks
    /// every principal; a catalog saved before it did reads `OWNER` as the
    /// keyword, as it was written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub execute_as_user: bool,
    /// The certificates and asymmetric keys that signed the module
    /// (`sys.crypt_properties`), as `CERTIFICATE::name` or
    /// `ASYMMETRIC KEY::name`: the module runs with their users' rights too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signed_by: Vec<String>,
    /// The keys that countersigned the module (`sys.crypt_properties`
    /// crypt_type CPVC or CPVA), named as in `signed_by`. "ADD SIGNATURE":
    /// a countersignature grants nothing by itself, but keeps the rights
    /// of a signature by the same key while a module it signed calls this
    /// one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counter_signed_by: Vec<String>,
    /// For a CLR module (a procedure, function or trigger of compiled code,
    /// with no text in any catalog), the assembly that holds its code and
    /// that assembly's permission set: `name (UNSAFE)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assembly: Option<String>,
    /// For a trigger, whether it is disabled (`sys.triggers.is_disabled`):
    /// it does not fire until someone with ALTER on its table enables it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
}

impl Object {
    /// Whom its `WITH EXECUTE AS` runs it as; `None` for CALLER.
    pub(crate) fn runs_as(&self) -> Option<ExecuteAs<'_>> {
        execute_as(self.execute_as.as_deref(), self.execute_as_user)
    }

    /// The name of the assembly that holds a CLR module's code.
    pub fn assembly_name(&self) -> Option<&str> {
        self.assembly
            .as_deref()
            .map(|a| a.rsplit_once(" (").map_or(a, |(name, _)| name))
    }

    /// `schema.name`, or the bare name of a database DDL trigger.
    pub fn qualified_name(&self) -> String {
        if self.schema.is_empty() {
            self.name.clone()
        } else {
            format!("{}.{}", self.schema, self.name)
        }
    }

    /// Whether this is `schema.name`, compared as the default collation does.
    pub fn is(&self, qualified: &str) -> bool {
        match qualified.split_once('.') {
            Some((s, n)) => self.schema.eq_ignore_ascii_case(s) && self.name.eq_ignore_ascii_case(n),
            None => false,
        }
    }
}

/// The object kinds the rules tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A user table.
    Table,
    /// A stored procedure.
    Procedure,
    /// A view.
    View,
    /// A scalar or table-valued function.
    Function,
    /// A DML trigger.
    Trigger,
    /// A synonym: an alias that a module can write through.
    Synonym,
    /// A database DDL trigger (`sys.triggers` with `parent_class = 0`): it
    /// fires on DDL by anyone, the deployer running `fencepost migrate`
    /// included, and runs with that session's rights.
    DatabaseTrigger,
}

impl ObjectKind {
    /// Whether objects of this kind have code that runs (or, for a synonym,
    /// that stands in for another object).
    pub fn is_module(self) -> bool {
        !matches!(self, ObjectKind::Table)
    }
}

/// `referencing` (a module, `schema.name`) names `referenced` (`schema.name`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    /// The module.
    pub referencing: String,
    /// What it names.
    pub referenced: String,
}

/// One row of the deploy runner's journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployedProcedure {
    /// `schema.name`.
    pub name: String,
    /// The hash of the server's definition right after the deploy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_hash: Option<String>,
}
