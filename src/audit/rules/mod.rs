//! The rules as one pure function from a catalog snapshot and a policy to a
//! report. Each file holds the rules about one kind of path to the fence.

mod database;
mod escalation;
mod execute;
mod grants;
mod membership;
mod modules;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::catalog::{Catalog, Object, ObjectKind, Permission, PermissionState, PrincipalKind, Securable};
use super::sqltext::{quote, quote2};
use super::{CannotVerify, Finding, Policy, Report, Rule};

/// Applies every live rule to `catalog`. Pure: the same snapshot always gives
/// the same report, so each rule is tested with fixture catalogs.
pub fn evaluate(catalog: &Catalog, policy: &Policy) -> Report {
    let ctx = Context::new(catalog, policy);
    let mut report = Report {
        target: catalog.database.clone(),
        rules_checked: Rule::LIVE.to_vec(),
        ..Report::default()
    };
    membership::check(&ctx, &mut report);
    grants::check(&ctx, &mut report);
    escalation::check(&ctx, &mut report);
    execute::check(&ctx, &mut report);
    modules::check(&ctx, &mut report);
    database::check(&ctx, &mut report);
    if let Some(reason) = ctx.permissions_hidden() {
        for rule in PERMISSION_RULES {
            report.cannot_verify.push(CannotVerify {
                rule,
                reason: reason.clone(),
            });
        }
    }
    report.normalize()
}

/// The rules that read `sys.database_permissions`.
const PERMISSION_RULES: [Rule; 6] = [
    Rule::WriteAccess,
    Rule::ReadAccess,
    Rule::CodeChange,
    Rule::PrincipalControl,
    Rule::ExecuteBeyondRole,
    Rule::GuestConnect,
];

/// A catalog with the questions every rule asks answered once.
pub(crate) struct Context<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) policy: &'a Policy,
    /// Service principals by lower-cased name, with their catalog spelling.
    service: BTreeMap<String, String>,
    /// Direct members of each role, by lower-cased role name.
    members: HashMap<String, Vec<String>>,
    fence_tables: BTreeSet<String>,
}

impl<'a> Context<'a> {
    fn new(catalog: &'a Catalog, policy: &'a Policy) -> Self {
        let mut members: HashMap<String, Vec<String>> = HashMap::new();
        for m in &catalog.memberships {
            members.entry(m.role.to_lowercase()).or_default().push(m.member.clone());
        }
        let mut fence_tables: BTreeSet<String> = policy.fence_tables.iter().cloned().collect();
        for o in &catalog.objects {
            // Babelfish lists `resource` for the `Resource` of the policy:
            // one table, as the default collation compares names.
            if o.kind == ObjectKind::Table
                && o.schema.eq_ignore_ascii_case(&policy.fence_schema)
                && !fence_tables.iter().any(|t| t.eq_ignore_ascii_case(&o.name))
            {
                fence_tables.insert(o.name.clone());
            }
        }
        let mut ctx = Self {
            catalog,
            policy,
            service: BTreeMap::new(),
            members,
            fence_tables,
        };
        let roots = policy.service_roles.iter().chain(&policy.principals);
        for root in roots {
            let spelled = catalog.principal(root).map_or(root.as_str(), |p| p.name.as_str());
            ctx.service.insert(root.to_lowercase(), spelled.to_string());
            for member in ctx.members_of(root) {
                let spelled = catalog.principal(&member).map_or(member.clone(), |p| p.name.clone());
                ctx.service.insert(member.to_lowercase(), spelled);
            }
        }
        ctx
    }

    /// Everyone inside `role`, through nested roles, lower-cased.
    pub(crate) fn members_of(&self, role: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut queue = vec![role.to_lowercase()];
        while let Some(r) = queue.pop() {
            for m in self.members.get(&r).into_iter().flatten() {
                if seen.insert(m.to_lowercase()) {
                    queue.push(m.to_lowercase());
                }
            }
        }
        seen
    }

    /// The service principals that hold whatever `principal` holds: itself,
    /// the members of a role, everyone for `public`.
    pub(crate) fn services_reached_by(&self, principal: &str) -> Vec<String> {
        if principal.eq_ignore_ascii_case("public") {
            return self.service.values().cloned().collect();
        }
        let mut inside = self.members_of(principal);
        inside.insert(principal.to_lowercase());
        self.service
            .iter()
            .filter(|(k, _)| inside.contains(*k))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// All service principals, in name order.
    pub(crate) fn service_principals(&self) -> impl Iterator<Item = &String> {
        self.service.values()
    }

    /// The names of the fence tables: the policy's and any table in the schema.
    pub(crate) fn fence_tables(&self) -> &BTreeSet<String> {
        &self.fence_tables
    }

    pub(crate) fn is_fence_table(&self, schema: &str, name: &str) -> bool {
        schema.eq_ignore_ascii_case(&self.policy.fence_schema)
            && self.fence_tables().iter().any(|t| t.eq_ignore_ascii_case(name))
    }

    pub(crate) fn is_shipped(&self, object: &Object) -> bool {
        object.kind == ObjectKind::Procedure && self.policy.procedure(&object.qualified_name()).is_some()
    }

    /// Granted (not denied) permissions.
    pub(crate) fn grants(&self) -> impl Iterator<Item = &'a Permission> {
        self.catalog
            .permissions
            .iter()
            .filter(|p| p.state != PermissionState::Deny)
    }

    /// Why the permission catalog cannot be trusted to be complete, if so.
    /// The deploy's own EXECUTE grants are the calibration: when the roles
    /// and procedures exist but not one of those grants shows, the view is
    /// hiding grants and an empty answer about any other grant means nothing.
    pub(crate) fn permissions_hidden(&self) -> Option<String> {
        let expected: Vec<(&str, &str)> = self
            .policy
            .expected_grants()
            .filter(|(role, proc)| self.catalog.principal(role).is_some() && self.catalog.object(proc).is_some())
            .collect();
        let shows = |role: &str, proc: &str| {
            self.grants().any(|p| {
                p.grantee.eq_ignore_ascii_case(role)
                    && p.permission.eq_ignore_ascii_case("EXECUTE")
                    && matches!(&p.on, Securable::Object { schema, name, .. }
                        if format!("{schema}.{name}").eq_ignore_ascii_case(proc))
            })
        };
        match expected.first() {
            Some((role, proc)) if !expected.iter().any(|(r, p)| shows(r, p)) => Some(format!(
                "the permission catalog (sys.database_permissions) shows none of the {} EXECUTE grants a deploy \
                 makes (such as EXECUTE on {proc} to {role}), so it is not showing grants and no grant can be \
                 ruled out",
                expected.len()
            )),
            None if self.catalog.permissions.is_empty() => Some(
                "the permission catalog (sys.database_permissions) is empty and the deployed roles and procedures \
                 it could be checked against are missing, so no grant can be ruled out"
                    .into(),
            ),
            _ => None,
        }
    }

    /// `USER::x`, `ROLE::x` or `APPLICATION ROLE::x`, as a fix statement needs.
    pub(crate) fn principal_class(&self, name: &str) -> &'static str {
        match self.catalog.principal(name).map(|p| p.kind) {
            Some(PrincipalKind::Role) => "ROLE",
            Some(PrincipalKind::ApplicationRole) => "APPLICATION ROLE",
            _ => "USER",
        }
    }

    /// How a securable reads in a finding.
    pub(crate) fn describe(&self, on: &Securable) -> String {
        match on {
            Securable::Database => format!("DATABASE::{}", self.catalog.database),
            Securable::Schema { schema } => format!("SCHEMA::{schema}"),
            Securable::Object {
                schema,
                name,
                column: None,
            } => format!("{schema}.{name}"),
            Securable::Object {
                schema,
                name,
                column: Some(c),
            } => format!("{schema}.{name} ({c})"),
            Securable::Principal { name } => format!("{}::{name}", self.principal_class(name)),
        }
    }

    /// The REVOKE that takes `p` away (with CASCADE when it was grantable).
    pub(crate) fn revoke(&self, p: &Permission) -> String {
        let on = match &p.on {
            Securable::Database => String::new(),
            Securable::Schema { schema } => format!(" ON SCHEMA::{}", quote(schema)),
            Securable::Object { schema, name, column } => format!(
                " ON OBJECT::{}{}",
                quote2(schema, name),
                column
                    .as_deref()
                    .map(|c| format!(" ({})", quote(c)))
                    .unwrap_or_default()
            ),
            Securable::Principal { name } => {
                format!(" ON {}::{}", self.principal_class(name), quote(name))
            }
        };
        let cascade = if p.state == PermissionState::GrantWithGrantOption {
            " CASCADE"
        } else {
            ""
        };
        format!(
            "REVOKE {}{on} FROM {}{cascade};",
            p.permission.to_uppercase(),
            quote(&p.grantee)
        )
    }

    /// A finding about permission row `p`, with the REVOKE as its fix.
    pub(crate) fn grant_finding(&self, rule: Rule, p: &Permission, why: &str) -> Finding {
        Finding {
            rule,
            principal: Some(p.grantee.clone()),
            object: self.describe(&p.on),
            permission: Some(p.permission.to_uppercase()),
            why: format!("{why}{}", self.reach_note(&p.grantee)),
            fix: self.revoke(p),
        }
    }

    /// ` (held by service principals a, b)` when a role passes it on.
    pub(crate) fn reach_note(&self, principal: &str) -> String {
        let reached: Vec<String> = self
            .services_reached_by(principal)
            .into_iter()
            .filter(|s| !s.eq_ignore_ascii_case(principal))
            .collect();
        if reached.is_empty() {
            String::new()
        } else {
            format!(
                " (held through {principal} by service principals {})",
                reached.join(", ")
            )
        }
    }
}

/// Compares catalog permission names, which are upper case on SQL Server.
pub(crate) fn is_one_of(permission: &str, names: &[&str]) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(permission))
}
