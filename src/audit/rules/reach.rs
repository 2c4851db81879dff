//! FP027: the audit's answer as reachability. Every principal, login and
//! server role the catalog shows that can write a fence table, run a
//! fence_admin procedure beyond the fence roles' grants, or change the
//! shipped procedures, by any path through the graph of [`super::super::reach`],
//! is named with that path, unless the policy trusts it (then the report
//! lists it apart, with its path, never silently).
//!
//! One path is reported once. A principal that another rule already names
//! keeps that rule's finding and text, which gains the path; the members of
//! a role that is a finding itself, who reach the goal only through it, are
//! listed in the role's finding rather than each on its own.

use std::collections::{BTreeMap, BTreeSet};

use super::super::finding::Step;
use super::super::reach::{Goal, Graph, Kind, Node, Reached, shortest, trusted_as};
use super::super::report::TrustedReach;
use super::{Context, Finding, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let graph = Graph::build(ctx);
    let reach: BTreeMap<Node, BTreeMap<Goal, Reached>> = graph
        .starts()
        .iter()
        .map(|s| (s.clone(), shortest(&graph, s, &graph.logins_of(s))))
        .filter(|(_, goals)| !goals.is_empty())
        .collect();
    let trust: BTreeMap<&Node, Option<String>> = reach.keys().map(|s| (s, trusted_as(&graph, s))).collect();
    let reported = |node: &Node, goal: Goal| {
        reach.get(node).is_some_and(|g| g.contains_key(&goal)) && trust.get(node).is_some_and(Option::is_none)
    };
    let mut emitted: Vec<(Node, Goal, Reached)> = Vec::new();
    // A member reaching a goal only through a role that is reported itself,
    // and the role it goes through.
    let mut folded: BTreeMap<(Node, Goal), Node> = BTreeMap::new();
    // Every reported principal each folded member goes through.
    let mut folded_into: BTreeMap<(Node, Goal), BTreeSet<Node>> = BTreeMap::new();
    for (start, goals) in &reach {
        if let Some(Some(why)) = trust.get(start) {
            let first = goals.values().next().map(|r| r.path.clone()).unwrap_or_default();
            report.trusted.push(TrustedReach {
                principal: graph.name(start),
                trusted_as: why.clone(),
                reaches: goals.keys().map(|g| g.describe().to_string()).collect(),
                path: first,
            });
            continue;
        }
        for (goal, reached) in goals {
            let roots: BTreeSet<Node> = graph
                .edges(start)
                .iter()
                .filter(|e| e.kind == Kind::Holds && reported(&e.to, *goal))
                .map(|e| e.to.clone())
                .collect();
            let Some(root) = roots.iter().next().cloned() else {
                emitted.push((start.clone(), *goal, reached.clone()));
                continue;
            };
            let mut avoid = roots.clone();
            avoid.extend(graph.logins_of(start));
            match shortest(&graph, start, &avoid).remove(goal) {
                Some(own) => emitted.push((start.clone(), *goal, own)),
                None => {
                    folded.insert((start.clone(), *goal), root);
                    folded_into.insert((start.clone(), *goal), roots);
                }
            }
        }
    }
    // The object at the end of each goal a start reaches, to tell which
    // goal an existing finding names.
    let mut ends: BTreeMap<Node, Vec<(Goal, String)>> = BTreeMap::new();
    for (start, goal, reached) in &emitted {
        ends.entry(start.clone())
            .or_default()
            .push((*goal, reached.object.clone()));
    }
    for (start, goal, reached) in emitted {
        let also: Vec<String> = folded
            .keys()
            .filter(|(member, g)| {
                // A user's login is the user; a server role's logins are
                // its members.
                *g == goal
                    && !(matches!(member, Node::Login(_)) && matches!(start, Node::Principal(_)))
                    && root_of(&folded, member, goal) == start
            })
            .map(|(member, _)| graph.name(member))
            .collect();
        let name = graph.name(&start);
        let mut principals = vec![graph.spelling(&start)];
        principals.extend(
            folded_into
                .iter()
                .filter(|((member, g), roots)| {
                    *g == goal
                        && (root_of(&folded, member, goal) == start
                            || roots.iter().any(|r| *r == start || root_of(&folded, r, goal) == start))
                })
                .map(|((member, _), _)| graph.spelling(member)),
        );
        let modules: Vec<String> = reached
            .through
            .iter()
            .filter(|n| matches!(n, Node::Code(_)))
            .map(|n| graph.spelling(n))
            .collect();
        // Another rule names this principal already, or one of the members
        // folded into it: that finding keeps its text and gains the path,
        // unless it names the object at the end of another goal's path
        // (then that path is its own, and this one is named apart).
        let others = ends.get(&start).map_or(&[][..], Vec::as_slice);
        let existing = report
            .findings
            .iter_mut()
            .filter(|f| !matches!(f.rule, Rule::ReadAccess | Rule::SideChannel | Rule::ReachesFence))
            .filter(|f| named_goal(f, others).is_none_or(|g| g == goal))
            .filter(|f| {
                // A rule may name several principals in one finding.
                f.principal.as_deref().is_some_and(|named| {
                    named
                        .split(", ")
                        .any(|p| principals.iter().any(|x| x.eq_ignore_ascii_case(p)))
                })
            })
            .min_by(|a, b| a.rule.cmp(&b.rule));
        if let Some(f) = existing {
            if f.path.is_empty() {
                f.path = reached.path.clone();
            }
            continue;
        }
        // A rule that names the module the path runs through gains the
        // path too, but names the module, not who runs it: this principal
        // is named here.
        for f in report.findings.iter_mut().filter(|f| {
            !matches!(f.rule, Rule::ReadAccess | Rule::SideChannel | Rule::ReachesFence)
                && f.path.is_empty()
                && modules.iter().any(|m| m.eq_ignore_ascii_case(&f.object))
        }) {
            f.path = reached.path.clone();
        }
        let also = if also.is_empty() {
            String::new()
        } else {
            format!("; its members {} hold the same path", also.join(", "))
        };
        report.findings.push(Finding {
            path: reached.path.clone(),
            rule: Rule::ReachesFence,
            principal: Some(name.clone()),
            object: reached.object.clone(),
            permission: Some(goal.describe().to_string()),
            why: format!(
                "{} can {} other than through the shipped procedures, and the policy does not trust it: {}{also}",
                name,
                goal.describe(),
                Step::chain(&name, &reached.path)
            ),
            fix: reached.path.first().map(|s| s.cut.clone()).unwrap_or_default(),
        });
    }
}

/// The goal whose path ends at the object `f` names, when one does: the
/// object itself, or the schema it is in (`SCHEMA::fence_admin`).
fn named_goal(f: &Finding, ends: &[(Goal, String)]) -> Option<Goal> {
    let named = f.object.to_lowercase();
    let named = named.split_once("::").map_or(named.as_str(), |(_, n)| n);
    ends.iter()
        .find(|(_, object)| {
            let object = object.to_lowercase();
            !object.is_empty() && (object == named || object.split_once('.').is_some_and(|(schema, _)| schema == named))
        })
        .map(|(goal, _)| *goal)
}

/// The reported principal a folded member's path goes through.
fn root_of(folded: &BTreeMap<(Node, Goal), Node>, member: &Node, goal: Goal) -> Node {
    let mut at = member.clone();
    let mut hops = 0;
    while let Some(next) = folded.get(&(at.clone(), goal)) {
        at = next.clone();
        hops += 1;
        if hops > folded.len() {
            break;
        }
    }
    at
}
