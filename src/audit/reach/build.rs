//! Building the graph from a catalog: principals first, then the edges each
//! kind of fact gives (memberships and ownership, code, the server), then who
//! the policy trusts.

use std::collections::{BTreeMap, BTreeSet};

use super::super::catalog::PrincipalKind;
use super::super::rules::Context;
use super::graph::Graph;
use super::node::Node;
use super::{
    added, availability_groups, cascades, code, created_code, database_owner, expressions, fixed_roles, leaving,
    lending, login_alter, orphans, principals, proxies, rights, runners, server, server_rights, signing,
    synonym_grants, trustworthy, writers,
};

impl Graph {
    /// The graph of `ctx`'s catalog: every edge from memberships,
    /// ownership, grants (weighed by the permission hierarchy), the fixed
    /// roles' documented rights, logins and server roles, and modules.
    pub(crate) fn build(ctx: &Context) -> Self {
        let mut graph = Graph {
            edges: BTreeMap::new(),
            names: BTreeMap::new(),
            trusted: BTreeSet::new(),
            starts: Vec::new(),
            contexts: BTreeMap::new(),
            drops: leaving::drops(ctx),
            answers: Default::default(),
            entered_by: Default::default(),
            toward_goals: Default::default(),
        };
        for p in &ctx.catalog.principals {
            let node = Node::principal(&p.name);
            graph.names.insert(node.clone(), p.name.clone());
            if p.kind != PrincipalKind::Role {
                graph.contexts.insert(node.clone(), ctx.holders(&p.name));
            }
            // A fixed role's rights are its members'; only a trusted one is
            // named for itself.
            if !fixed_roles::is_fixed(&p.name) || ctx.policy.trusts(&p.name) {
                graph.starts.push(node);
            }
        }
        let rights = rights::all(ctx);
        principals::edges(ctx, &rights, &mut graph);
        added::edges(ctx, &rights, &mut graph);
        code::edges(ctx, &rights, &mut graph);
        let through = writers::edges(ctx, &rights, &mut graph);
        cascades::edges(ctx, &rights, &mut graph);
        synonym_grants::edges(ctx, &rights, &mut graph);
        created_code::edges(ctx, &rights, &mut graph);
        database_owner::edges(ctx, &rights, &mut graph);
        expressions::edges(ctx, &rights, &mut graph);
        signing::edges(ctx, &mut graph);
        runners::edges(ctx, &rights, &mut graph);
        lending::edges(ctx, &rights, through, &mut graph);
        server::edges(ctx, &mut graph);
        server_rights::edges(ctx, &mut graph);
        availability_groups::edges(ctx, &mut graph);
        if let Some(server) = &ctx.catalog.server {
            login_alter::edges(ctx, server, &mut graph);
        }
        orphans::edges(ctx, &mut graph);
        proxies::edges(ctx, &mut graph);
        trustworthy::edges(ctx, &mut graph);
        for node in graph.names.keys() {
            let trusted = match node {
                Node::Principal(n) | Node::ServerRole(n) => ctx.policy.trusts(n),
                Node::Login(n) => ctx.policy.trusts(n),
                Node::Code(_) | Node::Goal(_) => false,
            };
            if trusted {
                graph.trusted.insert(node.clone());
            }
        }
        graph.starts.sort();
        graph.starts.dedup();
        graph.settle();
        graph
    }
}
