//! FP018: a service that is `db_owner` of another TRUSTWORTHY database whose
//! owner is a privileged login. There, `db_owner` may create a module `WITH
//! EXECUTE AS OWNER` that runs as that login at server level, and from it
//! write the fence tables here. msdb is TRUSTWORTHY and owned by sa by
//! default.

use super::super::catalog::OtherDatabaseUser;
use super::server_rights::is_privileged;
use super::{CannotVerify, Context, Finding, Report, Rule, is_one_of};
use crate::tsql::quote_name;

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let Some(databases) = &ctx.catalog.trustworthy_databases else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::TrustworthyElsewhere,
            reason: "the server's other TRUSTWORTHY databases (sys.databases) could not be listed".into(),
        });
        return;
    };
    let service_logins: Vec<(&String, &str)> = ctx
        .service_principals()
        .filter_map(|s| Some((s, ctx.principal(s)?.login.as_deref()?)))
        .collect();
    let mut unreadable = Vec::new();
    for db in databases
        .iter()
        .filter(|d| !d.name.eq_ignore_ascii_case(&ctx.catalog.database))
    {
        // An owner whose rights cannot be seen may be privileged.
        // So is one that owns this database, or is db_owner here: acting as
        // it at server level is entering this database as it.
        let privileged = match (&ctx.catalog.server, db.owner.as_deref()) {
            (Some(server), Some(owner)) => is_privileged(server, owner) || admin_here(ctx, owner),
            _ => true,
        };
        if !privileged {
            continue;
        }
        let Some(owners) = &db.db_owners else {
            unreadable.push(db.name.clone());
            continue;
        };
        // public's and guest's rights there are every login's that has a
        // user there, or every login when guest may connect: which those
        // are, the reader does not list.
        for u in owners
            .iter()
            .filter(|u| u.login.is_none() && is_one_of(&u.user, &["public", "guest"]))
        {
            report.cannot_verify.push(CannotVerify {
                rule: Rule::ReachesFence,
                reason: format!(
                    "{} holds {} in TRUSTWORTHY database {}{}: every login that enters it may act as its owner's \
                     login at server level, and which logins those are the catalog read does not list ({})",
                    u.user,
                    u.right,
                    db.name,
                    db.owner
                        .as_deref()
                        .map(|o| format!(", owned by the privileged login {o}"))
                        .unwrap_or_default(),
                    fix(&db.name, u)
                ),
            });
        }
        for (service, login) in &service_logins {
            // The owner's own login is the privileged one: FP002 and FP016
            // name it, and dbo cannot leave db_owner.
            if db.owner.as_deref().is_some_and(|o| o.eq_ignore_ascii_case(login)) {
                continue;
            }
            for u in owners
                .iter()
                .filter(|u| u.login.as_deref().is_some_and(|l| l.eq_ignore_ascii_case(login)))
            {
                report.findings.push(Finding {
                    path: Vec::new(),
                    rule: Rule::TrustworthyElsewhere,
                    principal: Some(service.to_string()),
                    object: format!("DATABASE::{}", db.name),
                    permission: Some(format!(
                        "login {login} holds {} in TRUSTWORTHY {}{}",
                        u.right,
                        db.name,
                        db.owner
                            .as_deref()
                            .map(|o| format!(", owned by {o}"))
                            .unwrap_or_default()
                    )),
                    why: format!(
                        "in a TRUSTWORTHY database {} lets its holder create or alter a module WITH EXECUTE AS \
                         OWNER that acts as the owner's login at server level{}, and so update the fence tables here",
                        u.right,
                        db.owner
                            .as_deref()
                            .map(|o| format!(" ({o}, a privileged login)"))
                            .unwrap_or_default()
                    ),
                    fix: fix(&db.name, u),
                });
            }
        }
    }
    if !unreadable.is_empty() && !service_logins.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::TrustworthyElsewhere,
            reason: format!(
                "the checking login cannot read who is db_owner of the TRUSTWORTHY database{} {}, owned by a \
                 login that is or may be privileged",
                if unreadable.len() == 1 { "" } else { "s" },
                unreadable.join(", ")
            ),
        });
    }
}

/// Whether `login` owns this database or enters it as a db_owner member.
fn admin_here(ctx: &Context, login: &str) -> bool {
    ctx.catalog.owner_login().is_some_and(|o| o.eq_ignore_ascii_case(login))
        || ctx
            .catalog
            .principals
            .iter()
            .any(|p| p.login.as_deref().is_some_and(|l| l.eq_ignore_ascii_case(login)) && ctx.is_admin(&p.name))
}

/// Leave the role, or give back the permission, in that database.
fn fix(db: &str, u: &OtherDatabaseUser) -> String {
    let db = quote_name(db);
    if u.right.starts_with("db_") {
        format!(
            "USE {db}; ALTER ROLE {} DROP MEMBER {};",
            quote_name(&u.right),
            quote_name(&u.via)
        )
    } else {
        format!("USE {db}; REVOKE {} FROM {};", u.right, quote_name(&u.via))
    }
}
