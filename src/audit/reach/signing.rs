//! Certificates and asymmetric keys: ADD SIGNATURE needs CONTROL on the key
//! and ALTER on the module ("ADD SIGNATURE (Transact-SQL)"), and the key's
//! private key in the database (WITH SIGNATURE takes a signature made
//! elsewhere, by whoever holds it), and a signed
//! module runs with the rights of the user mapped to the key, and of the
//! login mapped to it at server level. So the key's owner, and whoever holds
//! CONTROL or TAKE OWNERSHIP on it, acts as that user and login through a module it signs.

use super::super::catalog::{Securable, SigningKey};
use super::super::rules::Context;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use crate::tsql::quote_name;

pub(super) fn edges(ctx: &Context, graph: &mut Graph) {
    for k in ctx.catalog.signing_keys.iter().flatten() {
        // Without its private key here, no one can sign with it: ADD
        // SIGNATURE then takes only a signature made where the key is.
        if (k.user.is_none() && k.login.is_none()) || k.private_key == Some(false) {
            continue;
        }
        for (holder, evidence, cut) in controllers(ctx, k) {
            let sign = format!(
                "may sign a module it can alter with {}::{} (ADD SIGNATURE ... BY {} {}, which needs CONTROL on the \
                 key)",
                k.key,
                k.name,
                k.key,
                quote_name(&k.name)
            );
            let mut targets = Vec::new();
            if let Some(user) = &k.user {
                targets.push((
                    Node::principal(user),
                    format!("{sign}: the module runs with user {user}'s rights"),
                ));
            }
            if let Some(login) = &k.login {
                targets.push((
                    Node::login(login),
                    format!("{sign}: the module runs with login {login}'s server rights"),
                ));
            }
            for (to, step) in targets {
                graph.add(
                    Node::principal(&holder),
                    &holder,
                    Edge::new(to, Kind::Acts, step, evidence.clone(), cut.clone()),
                );
            }
        }
    }
}

/// Who controls the key: its owner, and holders of CONTROL or TAKE
/// OWNERSHIP on it by the hierarchy; with the evidence and the statement that removes it.
fn controllers(ctx: &Context, k: &SigningKey) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    if let Some(owner) = &k.owner {
        out.push((
            owner.clone(),
            format!("sys.{}: {} is owned by {owner}", catalog_view(&k.key), k.name),
            format!("ALTER AUTHORIZATION ON {}::{} TO [dbo];", k.key, quote_name(&k.name)),
        ));
    }
    for p in ctx.grants() {
        let Securable::Key { key, name } = &p.on else { continue };
        if !key.eq_ignore_ascii_case(&k.key) || !name.eq_ignore_ascii_case(&k.name) {
            continue;
        }
        // TAKE OWNERSHIP lets its holder make itself the owner (ALTER
        // AUTHORIZATION), and the owner holds CONTROL.
        let Some(held) = ctx.implies_any(p, &ctx.class_of(&p.on), &["CONTROL", "TAKE OWNERSHIP"]) else {
            continue;
        };
        let taken = if held == "CONTROL" {
            ""
        } else {
            ", with which it may take ownership of the key and so hold CONTROL"
        };
        out.push((
            p.grantee.clone(),
            format!(
                "sys.database_permissions: GRANT {} ON {}::{} TO {}{taken}",
                p.permission.to_uppercase(),
                k.key,
                k.name,
                p.grantee
            ),
            ctx.revoke(p),
        ));
    }
    out
}

fn catalog_view(key: &str) -> &'static str {
    if key.eq_ignore_ascii_case("CERTIFICATE") {
        "certificates"
    } else {
        "asymmetric_keys"
    }
}
