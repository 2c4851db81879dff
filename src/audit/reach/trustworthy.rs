//! Other databases of the server that are TRUSTWORTHY ("Extending Database
//! Impersonation by Using EXECUTE AS", "TRUSTWORTHY database property").
//! A context made in such a database by EXECUTE AS (a module WITH EXECUTE
//! AS OWNER, or EXECUTE AS USER) is trusted beyond it when its authenticator,
//! the database's owner, holds AUTHENTICATE SERVER (then at server level, as
//! the impersonated user's login) or holds AUTHENTICATE in a target database
//! (then in that database). So whoever there may make such a context (the
//! owner, db_owner, db_ddladmin, db_securityadmin, CONTROL, ALTER, or
//! IMPERSONATE on dbo, as the reader lists them) acts as the owner's login;
//! one who may also create users (the owner, db_owner, CONTROL, ALTER or
//! ALTER ANY USER there) maps a user to any login and acts as it.
//!
//! This database TRUSTWORTHY likewise lets a context made here, by
//! whoever can become a user here, act as that user's login.
//!
//! An owner that holds IMPERSONATE ANY LOGIN without AUTHENTICATE SERVER is
//! counted as reaching the server too: the documentation ties the trust to
//! AUTHENTICATE SERVER, but whether a module running as such an owner may
//! switch to another login is not something the catalog can show, and a
//! possible false finding is preferred to a missed one.

use super::super::catalog::OtherDatabase;
use super::super::hierarchy::implies;
use super::super::rules::{Context, server_holders};
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use super::server_denies::denied_to_code;
use crate::tsql::quote_name;

/// The rights there that also create a user for any login.
const CREATES_USERS: [&str; 4] = ["db_owner", "CONTROL", "ALTER", "ALTER ANY USER"];

pub(super) fn edges(ctx: &Context, graph: &mut Graph) {
    this_database(ctx, graph);
    let Some(databases) = &ctx.catalog.trustworthy_databases else {
        return;
    };
    for db in databases
        .iter()
        .filter(|d| !d.name.eq_ignore_ascii_case(&ctx.catalog.database))
    {
        let Some(owner) = db.owner.as_deref() else { continue };
        let at_server = authenticates_server(ctx, owner);
        let here = authenticates_here(ctx, owner);
        if at_server.is_none() && here.is_none() {
            continue;
        }
        for (holder, right, cut) in holders(db, owner) {
            let creates = right == "owner" || CREATES_USERS.iter().any(|r| r.eq_ignore_ascii_case(&right));
            let how = if right == "owner" {
                format!("owns TRUSTWORTHY database {}", db.name)
            } else {
                format!("holds {right} in TRUSTWORTHY database {}", db.name)
            };
            let evidence = format!(
                "sys.databases: {} is TRUSTWORTHY, owned by login {owner}{}",
                db.name,
                if right == "owner" {
                    String::new()
                } else {
                    format!("; {holder} holds {right} there")
                }
            );
            let targets = targets(ctx, owner, creates, at_server, here.as_deref());
            graph.actor(Node::login(&holder), &holder);
            for (to, step) in targets {
                if to == Node::login(&holder) {
                    continue;
                }
                graph.add(
                    Node::login(&holder),
                    &holder,
                    Edge::new(to, Kind::Acts, format!("{how}: {step}"), evidence.clone(), cut.clone()),
                );
            }
        }
    }
}

/// What makes `owner` act at server level from its database, if anything:
/// sysadmin, AUTHENTICATE SERVER held or implied (CONTROL SERVER) and not
/// denied, or (counted, see above) IMPERSONATE ANY LOGIN. A context made
/// there is trusted only through that right, so a DENY of it binds even a
/// member of securityadmin: the context cannot revoke what refuses it.
fn authenticates_server(ctx: &Context, owner: &str) -> Option<&'static str> {
    let server = ctx.catalog.server.as_ref()?;
    let holders = server_holders(server, owner);
    let holds = |name: &str| holders.iter().any(|h| h.eq_ignore_ascii_case(name));
    if holds("sysadmin") {
        return Some("is sysadmin");
    }
    let granted = |wanted: &str| {
        server.permissions.iter().any(|p| {
            p.on_login.is_none()
                && holds(&p.grantee)
                && implies("SERVER", &p.permission, "SERVER", wanted)
                && !denied_to_code(server, owner, "SERVER", wanted, None)
                && !denied_to_code(server, &p.grantee, "SERVER", wanted, None)
        })
    };
    if granted("AUTHENTICATE SERVER") {
        Some("holds AUTHENTICATE SERVER")
    } else if granted("IMPERSONATE ANY LOGIN") {
        Some("holds IMPERSONATE ANY LOGIN (counted as reaching the server: the catalog cannot show that it does not)")
    } else {
        None
    }
}

/// The user of `owner` here, when it holds AUTHENTICATE on this database
/// (granted, implied by CONTROL, or as dbo or db_owner).
fn authenticates_here(ctx: &Context, owner: &str) -> Option<String> {
    let user = ctx
        .catalog
        .principals
        .iter()
        .find(|p| p.login.as_deref().is_some_and(|l| l.eq_ignore_ascii_case(owner)))?;
    let holders = ctx.holders(&user.name);
    let holds = ctx.is_admin(&user.name)
        || ctx.grants().any(|p| {
            p.on == super::super::catalog::Securable::Database
                && holders.contains(&p.grantee.to_lowercase())
                && ctx.implies(p, "DATABASE", "AUTHENTICATE")
        });
    holds.then(|| user.name.clone())
}

/// Who may make a trusted context there: the owner, and the logins of those
/// the reader lists with a right there; with the right and what removes it.
fn holders(db: &OtherDatabase, owner: &str) -> Vec<(String, String, String)> {
    let mut out = vec![(
        owner.to_string(),
        "owner".to_string(),
        format!("ALTER DATABASE {} SET TRUSTWORTHY OFF;", quote_name(&db.name)),
    )];
    for u in db.db_owners.iter().flatten() {
        let Some(login) = u.login.as_deref() else { continue };
        if out
            .iter()
            .any(|(l, r, _)| l.eq_ignore_ascii_case(login) && r.eq_ignore_ascii_case(&u.right))
        {
            continue;
        }
        let cut = if u.right.starts_with("db_") {
            format!(
                "USE {}; ALTER ROLE {} DROP MEMBER {};",
                quote_name(&db.name),
                quote_name(&u.right),
                quote_name(&u.via)
            )
        } else {
            format!(
                "USE {}; REVOKE {} FROM {};",
                quote_name(&db.name),
                u.right,
                quote_name(&u.via)
            )
        };
        out.push((login.to_string(), u.right.clone(), cut));
    }
    out
}

/// Where a holder goes: the owner's login at server level, or any login's
/// when it creates users; with AUTHENTICATE here only, the owner's user here
/// or any user here.
fn targets(
    ctx: &Context,
    owner: &str,
    creates: bool,
    at_server: Option<&str>,
    here: Option<&str>,
) -> Vec<(Node, String)> {
    let mut out = Vec::new();
    if let Some(why) = at_server {
        out.push((
            Node::login(owner),
            format!("a module WITH EXECUTE AS OWNER there runs as login {owner} at server level, as {owner} {why}"),
        ));
    } else if let Some(user) = here {
        out.push((
            Node::principal(user),
            format!(
                "a module WITH EXECUTE AS OWNER there enters this database as {user}, as its owner {owner} holds \
                 AUTHENTICATE here"
            ),
        ));
    }
    if !creates {
        return out;
    }
    for p in &ctx.catalog.principals {
        let Some(login) = p.login.as_deref() else { continue };
        if login.eq_ignore_ascii_case(owner) {
            continue;
        }
        // EXECUTE AS USER there names a singleton account ("EXECUTE AS"):
        // never a key's or a built-in one. A group is reached through a
        // member: CREATE USER for a Windows account that enters through the
        // group needs no login of its own, and its token carries the group.
        let create = if super::singleton::login(ctx, login) {
            format!("CREATE USER ... FOR LOGIN {}; EXECUTE AS USER there", quote_name(login))
        } else if is_group_login(ctx, p) {
            format!(
                "CREATE USER for a member of the group {}; EXECUTE AS USER there",
                quote_name(login)
            )
        } else {
            continue;
        };
        if let Some(why) = at_server {
            out.push((
                Node::login(login),
                format!("{create} acts as login {login} at server level, as the owner {owner} {why}"),
            ));
        } else {
            out.push((
                Node::principal(&p.name),
                format!(
                    "{create} enters this database as {}, as the owner {owner} holds AUTHENTICATE here",
                    p.name
                ),
            ));
        }
    }
    out
}

/// This database TRUSTWORTHY, its owner authenticating at server level: a
/// context made here by EXECUTE AS USER is trusted beyond the database, as
/// the user's login. Whoever can become a user here (impersonate it, reset
/// its password, sign as it) holds its login's server rights. The user's
/// own login holds them already: FP027 leaves this step out of a path that
/// starts at the user itself.
fn this_database(ctx: &Context, graph: &mut Graph) {
    if !ctx.catalog.settings.is_some_and(|s| s.trustworthy) {
        return;
    }
    let Some(owner) = ctx.catalog.owner_login() else { return };
    let Some(why) = authenticates_server(ctx, owner) else {
        return;
    };
    for p in &ctx.catalog.principals {
        let Some(login) = p.login.as_deref() else { continue };
        graph.add(
            Node::principal(&p.name),
            &p.name,
            Edge::new(
                Node::login(login),
                Kind::Acts,
                format!(
                    "a context of user {} here (EXECUTE AS USER = '{}') is trusted at server level as login {login}: \
                     this database is TRUSTWORTHY and its owner {owner} {why}",
                    p.name, p.name
                ),
                format!(
                    "sys.databases: {} is TRUSTWORTHY, owned by login {owner}; {} has the SID of login {login}",
                    ctx.catalog.database, p.name
                ),
                format!(
                    "ALTER DATABASE {} SET TRUSTWORTHY OFF;",
                    quote_name(&ctx.catalog.database)
                ),
            ),
        );
    }
}

/// Whether `p`'s login is a Windows or Entra group.
fn is_group_login(ctx: &Context, p: &super::super::catalog::Principal) -> bool {
    p.login_kind.is_some_and(|k| k.is_group())
        || p.login.as_deref().is_some_and(|l| {
            ctx.catalog
                .server
                .as_ref()
                .is_some_and(|s| s.group_logins.iter().any(|g| g.eq_ignore_ascii_case(l)))
        })
}
