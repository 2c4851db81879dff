//! FP025: linked servers. A query through a linked server runs there as the
//! login its mapping names: one that points back at this server lets a login
//! run here as another (a remote login mapped for it, or itself outside the
//! session's context); one that maps to another login elsewhere may be this
//! server under another name, or link back, which no catalog here shows;
//! only a mapping that a service or a non-administrator may use matters.

use super::super::catalog::LinkedServer;
use super::server_rights::is_admin_login;
use super::{CannotVerify, Context, Finding, Report, Rule};

/// Host names that always mean the machine the server runs on.
const LOCAL_HOSTS: [&str; 5] = [".", "(local)", "localhost", "127.0.0.1", "::1"];

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let Some(linked) = &ctx.catalog.linked_servers else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::LinkedServer,
            reason: "linked servers and their login mappings (sys.servers, sys.linked_logins) could not be read in \
                     full: that needs sysadmin or VIEW ANY DEFINITION"
                .into(),
        });
        return;
    };
    for s in &linked.servers {
        let target = s.data_source.as_deref().unwrap_or(&s.name);
        let fix = format!(
            "EXEC sp_dropserver @server = N'{}', @droplogins = 'droplogins';",
            s.name.replace('\'', "''")
        );
        if is_this_server(target, &linked.this_server) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::LinkedServer,
                principal: None,
                object: format!("LINKED SERVER::{}", s.name),
                permission: Some(format!("loopback to {target}{}", mappings(s))),
                why: format!(
                    "the linked server {} points back at this server ({target}): a query through it runs here in a \
                     second session, as the login its mapping names, outside the caller's transaction and rights",
                    s.name
                ),
                fix,
            });
            continue;
        }
        // Only a mapping a service or a non-administrator may use is a way
        // here: one for every login, or for such a login. One used only by
        // administrators gives them nothing they lack.
        let others: Vec<String> = s
            .logins
            .iter()
            .filter(|l| !l.uses_self_credential)
            .filter(|l| l.local_login.as_deref().is_none_or(|login| !is_admin_login(ctx, login)))
            .map(|l| {
                format!(
                    "{} as {}",
                    l.local_login.as_deref().unwrap_or("every login"),
                    l.remote_login.as_deref().unwrap_or("no login")
                )
            })
            .collect();
        if !others.is_empty() {
            report.cannot_verify.push(CannotVerify {
                rule: Rule::LinkedServer,
                reason: format!(
                    "the linked server {} ({target}) maps {} to another login there, which a service or a login \
                     that is not an administrator may use: whether {target} is this server under another name, \
                     or links back, the catalog here cannot show",
                    s.name,
                    others.join(", ")
                ),
            });
        }
    }
}

fn mappings(s: &LinkedServer) -> String {
    let mapped: Vec<String> = s
        .logins
        .iter()
        .map(|l| {
            let who = l.local_login.as_deref().unwrap_or("every login");
            if l.uses_self_credential {
                format!("{who} as itself")
            } else {
                format!("{who} as {}", l.remote_login.as_deref().unwrap_or("no login"))
            }
        })
        .collect();
    if mapped.is_empty() {
        String::new()
    } else {
        format!(", mapping {}", mapped.join(", "))
    }
}

/// Whether `data_source` (`tcp:host\instance,port`) names this server.
fn is_this_server(data_source: &str, this_server: &[String]) -> bool {
    let (host, instance) = host_and_instance(data_source);
    this_server.iter().any(|name| {
        let (h, i) = host_and_instance(name);
        i == instance && (h == host || LOCAL_HOSTS.contains(&host.as_str()))
    })
}

fn host_and_instance(name: &str) -> (String, String) {
    let name = name.trim().to_lowercase();
    let name = ["tcp:", "np:", "lpc:", "admin:"]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(&name)
        .to_string();
    let name = name.split(',').next().unwrap_or_default();
    match name.split_once('\\') {
        Some((h, i)) if i != "mssqlserver" => (h.to_string(), i.to_string()),
        Some((h, _)) => (h.to_string(), String::new()),
        None => (name.to_string(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_source_names_this_server_by_alias_port_or_protocol() {
        let this = vec!["SQL01\\ORDERS".to_string()];
        assert!(is_this_server("sql01\\orders", &this));
        assert!(is_this_server("tcp:localhost\\ORDERS,1433", &this));
        assert!(is_this_server("(local)\\orders", &this));
        assert!(!is_this_server("sql01", &this));
        assert!(!is_this_server("sql02\\orders", &this));
        let default = vec!["SQL01".to_string()];
        assert!(is_this_server(".", &default));
        assert!(is_this_server("SQL01\\MSSQLSERVER", &default));
    }
}
