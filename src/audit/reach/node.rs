//! The nodes of the reachability graph: who can act, the code that runs as
//! someone else, and what the audit asks whether they reach.

/// What nothing but the shipped procedures and the deploy's grants may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Goal {
    /// INSERT, UPDATE, DELETE, ALTER (TRUNCATE, triggers) or TAKE OWNERSHIP
    /// on a fence table, held or reached through code that runs as its owner.
    WriteFence,
    /// EXECUTE on a fence_admin procedure beyond the fence roles' grants.
    RunAdmin,
    /// ALTER on the shipped procedures or their schemas.
    AlterCode,
}

impl Goal {
    /// What reaching the goal lets a principal do, for a finding.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Goal::WriteFence => "write the fence tables",
            Goal::RunAdmin => "run fence_admin procedures",
            Goal::AlterCode => "change the shipped procedures",
        }
    }
}

/// A node, by lower-cased name; [`super::Graph::name`] gives its spelling.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Node {
    /// A database user, role, application role or group.
    Principal(String),
    /// A server login.
    Login(String),
    /// A server role.
    ServerRole(String),
    /// A module other than the shipped procedures, `schema.name`: code that
    /// runs with its owner's rights on what that owner owns.
    Code(String),
    /// What the audit asks about.
    Goal(Goal),
}

impl Node {
    pub(crate) fn principal(name: &str) -> Self {
        Node::Principal(name.to_lowercase())
    }

    pub(crate) fn login(name: &str) -> Self {
        Node::Login(name.to_lowercase())
    }

    pub(crate) fn server_role(name: &str) -> Self {
        Node::ServerRole(name.to_lowercase())
    }

    pub(crate) fn code(qualified: &str) -> Self {
        Node::Code(qualified.to_lowercase())
    }
}
