//! What a DENY leaves of an edge: whom it still binds, and the memberships
//! the right's holder drops first to get past those it can leave.

use super::drops::Leaving;
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
    /// The principals (lower-cased) of the DENYs made to the holder itself,
    /// one of its roles or public: they bind every session that holds the
    /// right, unless it drops its way out from under them.
    pub(crate) cutting: Vec<String>,
    /// Whether the holder alone cannot drop its way out from under
    /// `cutting`: only a session that can (a member that may drop a link
    /// higher up, or one helped by whom it acted as first) gets past.
    pub(crate) refused: bool,
    /// The memberships the holder adds and drops first.
    pub(crate) left: Leaving,
}

impl Bound {
    /// Whether no DENY binds anyone on the edge.
    pub(crate) fn is_empty(&self) -> bool {
        self.denied.is_empty() && self.cutting.is_empty()
    }

    /// Every principal a DENY on the edge is made to.
    pub(crate) fn all_denied(&self) -> Vec<String> {
        let mut all = self.cutting.clone();
        all.extend(self.denied.iter().cloned());
        all
    }
}

/// `, after first leaving the role a DENY is made to (ALTER ROLE [r] DROP
/// MEMBER [m];)...` when memberships are dropped first, each join named
/// before the drops.
pub(crate) fn note(left: &Leaving) -> String {
    if left.dropped.is_empty() {
        return String::new();
    }
    let statements: Vec<String> = left
        .joined
        .iter()
        .map(|(m, r)| format!("ALTER ROLE {} ADD MEMBER {};", quote_name(r), quote_name(m)))
        .chain(
            left.dropped
                .iter()
                .map(|(m, r)| format!("ALTER ROLE {} DROP MEMBER {};", quote_name(r), quote_name(m))),
        )
        .collect();
    let roles: Vec<&str> = left.dropped.iter().map(|(_, r)| r.as_str()).collect();
    format!(
        ", after first leaving the role a DENY is made to ({}), which rights over {} held in the session, or by \
             whom it acted as first, allow: the DENY binds only the roles of the session{}",
        statements.join(" "),
        roles.join(", "),
        detours_note(&left.detours)
    )
}

/// `, acting as v for them (IMPERSONATE on USER::v ...; REVERT)` for the
/// detours a path's drops took, or nothing.
fn detours_note(taken: &[(String, Vec<String>)]) -> String {
    taken
        .iter()
        .map(|(user, via)| {
            let reverts = vec!["REVERT"; via.len()].join("; ");
            format!(
                ", acting as {user} for them and coming back ({}; {reverts}): what a session does as the user it \
                 impersonates stays done after REVERT",
                via.join(", then ")
            )
        })
        .collect()
}
