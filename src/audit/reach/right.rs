//! One right a principal holds, as a permission row would state it, with how
//! it is held and the statement that removes it.

use super::super::catalog::{Permission, PermissionState};
use super::node::Node;

/// A right `holder` has, as a permission row would state it.
pub(crate) struct Right {
    pub(crate) holder: String,
    pub(crate) permission: Permission,
    /// How it is held, when not by a plain grant of exactly that permission
    /// (`owns SCHEMA::app`, `db_datawriter's documented rights`).
    pub(crate) held: Option<String>,
    pub(crate) evidence: String,
    pub(crate) cut: String,
    /// A plain catalog GRANT (not WITH GRANT OPTION, not implied).
    pub(crate) plain_grant: bool,
    /// Held by a login that has no user here and enters the database
    /// another way (CONNECT ANY DATABASE, guest): the login acts, not a
    /// database principal.
    pub(crate) login: bool,
    /// Whether no DENY binds it: its holder owns the securable, or holds
    /// CONTROL there and so may revoke any DENY in its way.
    pub(crate) undeniable: bool,
    /// Held by taking ownership of a schema: the schema's objects without
    /// an owner of their own pass to the taker with it, so none of them
    /// still runs as the owner they had.
    pub(crate) taken: bool,
}

impl Right {
    /// ` WITH GRANT OPTION: ...` when the holder may hand the right on.
    pub(crate) fn grant_option(&self) -> &'static str {
        if self.permission.state == PermissionState::GrantWithGrantOption {
            " WITH GRANT OPTION, so it can hand it on to anyone"
        } else {
            ""
        }
    }

    /// The node that holds it: the database principal, or the login.
    pub(crate) fn node(&self) -> Node {
        if self.login {
            Node::login(&self.holder)
        } else {
            Node::principal(&self.holder)
        }
    }
}
