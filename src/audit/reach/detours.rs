//! Detours: a session acts as a user it may impersonate, drops a membership
//! there, and comes back. "EXECUTE AS" changes the session's context and
//! "REVERT" returns it to the one before; what it did in between (an
//! ALTER ROLE ... DROP MEMBER included) stays done. So the users a context
//! may impersonate, and those they may impersonate in turn, lend it their
//! rights to drop members from roles without the path ever staying in
//! them.
//!
//! The session holds its roles' rights, so an IMPERSONATE granted to one
//! of them is a detour too; and while it is its login's, EXECUTE AS LOGIN
//! on a login it may impersonate acts as that login's user here, which
//! REVERT comes back from as well.
//!
//! Only an impersonation no DENY binds in the session is a detour: one a
//! DENY binds would need drops of its own first, which a detour does not
//! chain (it errs towards a path not found, never towards a false one).

use std::collections::{BTreeSet, VecDeque};

use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;

/// A user a context may become and come back from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Detour {
    /// The user acted as.
    pub(crate) user: Node,
    /// Its principals (itself, its roles, public), lower-cased: the session
    /// its ALTER ROLE runs in.
    pub(crate) context: BTreeSet<String>,
    /// The impersonation steps from the context to it, first to last.
    pub(crate) via: Vec<String>,
}

/// The users `from` may impersonate, directly or through others, each
/// with the steps that lead to it: breadth first, so each by its shortest
/// chain. A session holds the rights of its roles, so an IMPERSONATE
/// granted to one of them is an EXECUTE AS USER it may run. While it is
/// still its own login's (`as_login`: it has impersonated no one yet, or
/// only logins), it holds that login's server rights too, and EXECUTE AS
/// LOGIN takes it to the login's user here; EXECUTE AS USER confines it to
/// the database, so no login is impersonated after one.
impl Graph {
    pub(crate) fn detours(&self, from: &Node, as_login: bool) -> Vec<Detour> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::from([from.clone()]);
        let mut queue = VecDeque::from([(from.clone(), as_login, Vec::<String>::new())]);
        while let Some((at, as_login, via)) = queue.pop_front() {
            let Some(session) = self.contexts.get(&at) else {
                continue;
            };
            for (holder, edge) in self.acting(&at, session, as_login) {
                // A DENY that binds a principal of the session refuses the
                // impersonation; one that binds only others does not.
                if !edge.reverts || edge.unless.all_denied().iter().any(|d| session.contains(d)) {
                    continue;
                }
                let login = matches!(edge.to, Node::Login(_));
                let Some(user) = (if login {
                    self.user_of(&edge.to)
                } else {
                    Some(edge.to.clone())
                }) else {
                    continue;
                };
                let Some(context) = self.contexts.get(&user) else {
                    continue;
                };
                if !seen.insert(user.clone()) {
                    continue;
                }
                let mut steps = via.clone();
                steps.push(if holder == at {
                    edge.step.step.clone()
                } else {
                    let holds = match holder {
                        Node::Login(_) => format!("as {}", self.name(&holder)),
                        _ => format!("as a member of {}", self.name(&holder)),
                    };
                    format!("{holds}: {}", edge.step.step)
                });
                out.push(Detour {
                    user: user.clone(),
                    context: context.clone(),
                    via: steps.clone(),
                });
                queue.push_back((user, as_login && login, steps));
            }
        }
        out
    }

    /// The edges a session acting as `at` may take, with the node that
    /// holds each: its own, its roles' and, while it is its login's, the
    /// login's and its server roles'.
    fn acting(&self, at: &Node, session: &BTreeSet<String>, as_login: bool) -> Vec<(Node, &Edge)> {
        let mut holders: Vec<Node> = vec![at.clone()];
        holders.extend(session.iter().map(|p| Node::principal(p)).filter(|p| p != at));
        if as_login {
            let mut queue: VecDeque<Node> = self.logins_of(at).into_iter().collect();
            while let Some(n) = queue.pop_front() {
                if holders.contains(&n) {
                    continue;
                }
                for e in self.edges(&n) {
                    if e.kind == Kind::Holds && matches!(e.to, Node::ServerRole(_)) {
                        queue.push_back(e.to.clone());
                    }
                }
                holders.push(n);
            }
        }
        holders
            .into_iter()
            .flat_map(|h| self.edges(&h).iter().map(move |e| (h.clone(), e)))
            .collect()
    }

    /// The user a login enters this database as.
    fn user_of(&self, login: &Node) -> Option<Node> {
        self.edges(login)
            .iter()
            .find(|e| e.kind == Kind::Holds && matches!(e.to, Node::Principal(_)))
            .map(|e| e.to.clone())
    }
}
