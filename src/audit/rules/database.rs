//! FP012, FP013 and FP014: database options and the guest user, which widen
//! who can reach the fence from outside the database.

use super::super::catalog::Securable;
use super::{CannotVerify, Context, Finding, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let db = &ctx.catalog.database;
    match ctx.catalog.settings {
        None => {
            for rule in [Rule::CrossDatabaseChaining, Rule::Trustworthy] {
                report.cannot_verify.push(CannotVerify {
                    rule,
                    reason: "the database's options (sys.databases) could not be read".into(),
                });
            }
        }
        Some(settings) => {
            if settings.db_chaining {
                report.findings.push(Finding {
                    path: Vec::new(),
                    rule: Rule::CrossDatabaseChaining,
                    principal: None,
                    object: format!("DATABASE::{db}"),
                    permission: Some("DB_CHAINING ON".into()),
                    why: "code in another database whose owner owns the fence tables here reaches them without a \
                          permission check"
                        .into(),
                    fix: "ALTER DATABASE CURRENT SET DB_CHAINING OFF;".into(),
                });
            }
            if settings.trustworthy {
                report.findings.push(Finding {
                    path: Vec::new(),
                    rule: Rule::Trustworthy,
                    principal: None,
                    object: format!("DATABASE::{db}"),
                    permission: Some("TRUSTWORTHY ON".into()),
                    why: "code here may impersonate at server level, and anyone who can change code in this \
                          database may become the database owner's login"
                        .into(),
                    fix: "ALTER DATABASE CURRENT SET TRUSTWORTHY OFF;".into(),
                });
            }
        }
    }
    server_chaining(ctx, report);
    for p in ctx.grants() {
        if p.grantee.eq_ignore_ascii_case("guest")
            && p.on == Securable::Database
            && ctx.implies(p, "DATABASE", "CONNECT")
        {
            let why = "every login on the server may enter the database as guest and holds whatever public holds";
            report.findings.push(ctx.grant_finding(Rule::GuestConnect, p, why));
        }
    }
}

/// The server option chains ownership across every database, whatever each
/// database's own DB_CHAINING says. On an engine that does not chain
/// ownership at all it cannot matter.
fn server_chaining(ctx: &Context, report: &mut Report) {
    if !ctx.catalog.engine.chains_ownership {
        return;
    }
    match ctx.catalog.server_settings {
        None => report.cannot_verify.push(CannotVerify {
            rule: Rule::CrossDatabaseChaining,
            reason: "the server option cross db ownership chaining (sys.configurations) could not be read".into(),
        }),
        Some(s) if s.cross_db_ownership_chaining => report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::CrossDatabaseChaining,
            principal: None,
            object: "SERVER".into(),
            permission: Some("cross db ownership chaining = 1".into()),
            why: "the server option turns ownership chaining on across every database: code in another database \
                  whose owner owns the fence tables here reaches them without a permission check"
                .into(),
            fix: "EXEC sp_configure 'cross db ownership chaining', 0; RECONFIGURE;".into(),
        }),
        Some(_) => {}
    }
}
