//! SQL Server Agent proxies and server options that open a way out of
//! T-SQL, on layouts written from Microsoft's documentation: "Create a SQL
//! Server Agent proxy" (a CmdExec or PowerShell step that names a proxy
//! runs as its credential's Windows account, and a proxy is granted to
//! logins, server roles and msdb roles with sp_grant_login_to_proxy);
//! "Server configuration options" (ALTER SETTINGS, which serveradmin holds,
//! turns `xp_cmdshell` and `Ole Automation Procedures` on), "xp_cmdshell"
//! (others than sysadmin run it with EXECUTE granted in master, as its
//! proxy account), "OLE Automation Procedures" (sp_OACreate).

use crate::support;

use fencepost::audit::{AgentProxy, Catalog, OutsideItem, OutsideKind, ProxyUser, ProxyUserKind, Rule};
use support::fixtures::*;

/// An ETL user in db_datawriter behind the Windows login of the proxy's
/// account; `ops` may use the proxy.
fn proxy(c: &mut Catalog, identity: Option<&str>, users: &[(&str, ProxyUserKind)]) {
    c.principals.push(user("etl", Some(r"CORP\etl_svc")));
    c.principals.last_mut().unwrap().login_kind = Some(fencepost::audit::LoginKind::Windows);
    c.memberships.push(member("db_datawriter", "etl"));
    c.agent_proxies = Some(vec![AgentProxy {
        name: "EtlProxy".into(),
        identity: identity.map(String::from),
        users: users
            .iter()
            .map(|(name, kind)| ProxyUser {
                name: name.to_string(),
                kind: *kind,
            })
            .collect(),
    }]);
}

fn outside_reasons(c: &Catalog) -> Vec<String> {
    check(c)
        .cannot_verify_of(Rule::OutsideTsql)
        .map(|u| u.reason.clone())
        .collect()
}

#[test]
fn whoever_may_use_a_proxy_acts_as_the_login_of_its_account() {
    for (user, kind, named) in [
        ("ops", ProxyUserKind::Login, "login ops"),
        ("ops_role", ProxyUserKind::ServerRole, "server role ops_role"),
    ] {
        let mut c = clean();
        proxy(&mut c, Some(r"CORP\etl_svc"), &[(user, kind)]);
        let f = reaching(&c, named);
        assert_eq!(f.len(), 1, "{named}: {:#?}", check(&c));
        assert_eq!(
            step_texts(&f[0])[..2],
            [
                r"may use SQL Server Agent proxy EtlProxy in a CmdExec or PowerShell step of a job of its own: the step runs as the Windows account CORP\etl_svc, which signs in here as login CORP\etl_svc",
                "enters the database as user etl"
            ]
        );
        assert_eq!(
            f[0].fix,
            format!("EXEC msdb.dbo.sp_revoke_login_from_proxy @name = N'{user}', @proxy_name = N'EtlProxy';")
        );
        assert!(outside_reasons(&c).is_empty(), "{:#?}", check(&c));
    }
}

#[test]
fn a_proxy_whose_account_has_no_login_here_or_whose_users_are_msdb_roles_cannot_be_verified() {
    for (identity, users, expect) in [
        (
            Some(r"CORP\batch"),
            vec![("ops", ProxyUserKind::Login)],
            r"as Windows account CORP\batch, which no login the catalog shows stands for",
        ),
        (
            None,
            vec![("ops", ProxyUserKind::Login)],
            "as a Windows account the checking login cannot see",
        ),
        (
            Some(r"CORP\etl_svc"),
            vec![("SQLAgentOperatorRole", ProxyUserKind::MsdbRole)],
            "msdb role SQLAgentOperatorRole may use it",
        ),
    ] {
        let mut c = clean();
        proxy(&mut c, identity, &users);
        let reasons = outside_reasons(&c);
        assert_eq!(reasons.len(), 1, "{reasons:#?}");
        assert!(reasons[0].contains(expect), "{}", reasons[0]);
        assert!(reaching(&c, "login ops").is_empty(), "{:#?}", check(&c));
    }
}

#[test]
fn a_proxy_granted_to_no_one_but_sysadmin_is_clean_and_unread_proxies_are_unverified() {
    let mut c = clean();
    proxy(&mut c, Some(r"CORP\etl_svc"), &[]);
    assert!(outside_reasons(&c).is_empty());
    assert!(
        check(&c)
            .findings
            .iter()
            .all(|f| f.path.iter().all(|s| !s.step.contains("proxy"))),
        "{:#?}",
        check(&c)
    );
    c.agent_proxies = None;
    let reasons = outside_reasons(&c);
    assert_eq!(reasons.len(), 1, "{reasons:#?}");
    assert!(reasons[0].contains("msdb.dbo.sysproxylogin"), "{}", reasons[0]);
}

#[test]
fn an_xp_cmdshell_or_ole_grant_while_off_names_who_may_turn_it_on() {
    for (kind, expect) in [
        (OutsideKind::XpCmdshell, "through xp_cmdshell"),
        (OutsideKind::OleAutomation, "the OLE Automation procedures (sp_OACreate"),
    ] {
        let mut c = clean();
        server_facts(&mut c).role_members.push(member("serveradmin", "tuner"));
        server_facts(&mut c)
            .permissions
            .push(server_grant("config_bot", "ALTER SETTINGS"));
        c.outside_tsql.as_mut().unwrap().items.push(OutsideItem {
            kind,
            name: "ops_runner".into(),
            detail: Some("runs commands as the xp_cmdshell proxy account; off now".into()),
        });
        let reasons = outside_reasons(&c);
        assert_eq!(reasons.len(), 1, "{reasons:#?}");
        assert!(reasons[0].contains(expect), "{}", reasons[0]);
        assert!(
            reasons[0].contains(
                "off now, and may be turned on by login config_bot (ALTER SETTINGS), server role serveradmin, sysadmin"
            ),
            "{}",
            reasons[0]
        );
    }
}
