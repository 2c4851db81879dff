//! SQL Server Agent proxies ("Create a SQL Server Agent proxy"): whoever a
//! proxy is granted to may name it in a CmdExec or PowerShell step of a job
//! of its own, and the step runs as the Windows account of the proxy's
//! credential, which may sign in to this server as the login of that
//! account. Where that login is one the catalog shows, the proxy's users
//! act as it; where it is not, or the proxy's users are msdb roles whose
//! members are not read, FP028 names the proxy as "cannot verify".

use super::super::catalog::ProxyUserKind;
use super::super::rules::Context;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use crate::tsql::literal;

pub(super) fn edges(ctx: &Context, graph: &mut Graph) {
    for p in ctx.catalog.agent_proxies.iter().flatten() {
        let Some(identity) = p.identity.as_deref() else {
            continue;
        };
        let account = Node::login(identity);
        if !graph.names.contains_key(&account) {
            continue;
        }
        for u in &p.users {
            let from = match u.kind {
                ProxyUserKind::Login => Node::login(&u.name),
                ProxyUserKind::ServerRole => Node::server_role(&u.name),
                ProxyUserKind::MsdbRole => continue,
            };
            if from == account {
                continue;
            }
            graph.actor(from.clone(), &u.name);
            graph.add(
                from,
                &u.name,
                Edge::new(
                    account.clone(),
                    Kind::Acts,
                    format!(
                        "may use SQL Server Agent proxy {} in a CmdExec or PowerShell step of a job of its own: the \
                         step runs as the Windows account {identity}, which signs in here as login {identity}",
                        p.name
                    ),
                    format!(
                        "msdb.dbo.sysproxylogin: {} may use proxy {}; its credential's account is {identity}",
                        u.name, p.name
                    ),
                    format!(
                        "EXEC msdb.dbo.sp_revoke_login_from_proxy @name = {}, @proxy_name = {};",
                        literal(&u.name),
                        literal(&p.name)
                    ),
                ),
            );
        }
    }
}
