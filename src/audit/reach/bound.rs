//! What a DENY leaves of an edge: whom it still binds, and the memberships
//! the right's holder drops first to get past those it can leave.

use crate::tsql::quote_name;

/// The principals (lower-cased) a DENY binds on an edge, the holder of the
/// right the edge rests on, and the memberships the holder drops first so
/// that the DENYs made to the roles it leaves no longer apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bound {
    /// Whoever acts as one of them, or as a member of one, is refused the
    /// edge unless it can leave them all and keep `keep`.
    pub(crate) denied: Vec<String>,
    /// The holder of the right (lower-cased): a session that leaves roles to
    /// get past a DENY must stay in it.
    pub(crate) keep: String,
    /// `(member, role)` memberships dropped first.
    pub(crate) left: Vec<(String, String)>,
}

impl Bound {
    /// Whether no DENY binds anyone on the edge.
    pub(crate) fn is_empty(&self) -> bool {
        self.denied.is_empty()
    }

    /// `; first ALTER ROLE [r] DROP MEMBER [m], after which the DENY made
    /// to r no longer applies` when memberships are dropped first.
    pub(crate) fn note(&self) -> String {
        if self.left.is_empty() {
            return String::new();
        }
        let drops: Vec<String> = self
            .left
            .iter()
            .map(|(m, r)| format!("ALTER ROLE {} DROP MEMBER {};", quote_name(r), quote_name(m)))
            .collect();
        let roles: Vec<&str> = self.left.iter().map(|(_, r)| r.as_str()).collect();
        format!(
            ", after first leaving the role a DENY is made to ({}), which its rights over {} allow: the DENY binds \
             only the roles of the session",
            drops.join(" "),
            roles.join(", ")
        )
    }
}
