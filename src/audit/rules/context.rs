//! A catalog with the questions every rule asks answered once: who is a
//! service, who reaches whom through roles, which tables are the fence.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use super::super::catalog::{
    Catalog, Object, ObjectKind, Permission, PermissionState, Principal, PrincipalKind, Securable,
};
use super::super::hierarchy;
use super::super::reach::Drops;
use super::{Finding, Policy, Rule};
use crate::tsql::{quote_name, quote_qualified};

pub(crate) struct Context<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) policy: &'a Policy,
    /// Service principals by lower-cased name, with their catalog spelling.
    service: BTreeMap<String, String>,
    /// Direct members of each role, by lower-cased role name.
    members: HashMap<String, Vec<String>>,
    fence_tables: BTreeSet<String>,
    /// `--principal` names that match neither a principal nor a login.
    unresolved: Vec<String>,
    /// Why the permission catalog cannot be trusted to be complete, if so;
    /// then who is a service is known only from roles and `--principal`.
    pub(crate) permissions_hidden: Option<String>,
    /// The memberships and the rights to drop them, worked out once: every
    /// DENY judged asks.
    drops: OnceCell<Rc<Drops>>,
    /// Each principal by its name, as `Catalog::principal` matches it
    /// (ASCII case ignored, the first of a name): asked for every grant.
    principals: HashMap<String, &'a Principal>,
    /// The grantees (lower-cased) of CONTROL on the database or what
    /// implies it, gathered once: asked for every principal weighed.
    controllers: OnceCell<BTreeSet<String>>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(catalog: &'a Catalog, policy: &'a Policy) -> Self {
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
            unresolved: Vec::new(),
            permissions_hidden: None,
            drops: OnceCell::new(),
            principals: HashMap::new(),
            controllers: OnceCell::new(),
        };
        for p in &catalog.principals {
            ctx.principals.entry(p.name.to_ascii_lowercase()).or_insert(p);
        }
        let mut roots: Vec<String> = policy.service_roles.clone();
        for name in &policy.principals {
            // A service may be named by its login: its user is found by SID.
            match catalog.principal_or_login(name) {
                Some(p) => roots.push(p.name.clone()),
                None => ctx.unresolved.push(name.clone()),
            }
        }
        roots.extend(ctx.executors());
        for root in &roots {
            let spelled = ctx.principal(root).map_or(root.as_str(), |p| p.name.as_str());
            ctx.service.insert(root.to_lowercase(), spelled.to_string());
            for member in ctx.members_of(root) {
                let spelled = ctx.principal(&member).map_or(member.clone(), |p| p.name.clone());
                ctx.service.insert(member.to_lowercase(), spelled);
            }
        }
        ctx
    }

    /// Whoever may run a shipped procedure or anything in a code schema is a
    /// service, in a fence role or not. `public` is left out: its grants
    /// reach every service already, and each is a finding of its own.
    fn executors(&self) -> Vec<String> {
        // Whatever implies EXECUTE on a procedure (EXECUTE or CONTROL on it or
        // its schema) makes a service; on the whole database only EXECUTE
        // does: CONTROL of the database is an administrator's right, found
        // by the rules as such.
        self.grants()
            .filter(|p| self.implies(p, "OBJECT", "EXECUTE") && !p.grantee.eq_ignore_ascii_case("public"))
            .filter(|p| match &p.on {
                Securable::Database => !self.is_database_control(p),
                Securable::Schema { schema } => self.policy.code_schemas.iter().any(|s| s.eq_ignore_ascii_case(schema)),
                Securable::Object { schema, name, .. } => self.policy.procedure(&format!("{schema}.{name}")).is_some(),
                Securable::Principal { .. } | Securable::Key { .. } | Securable::Other { .. } => false,
            })
            .map(|p| p.grantee.clone())
            .collect()
    }

    /// `--principal` names that match no database principal and no login
    /// behind one.
    pub(crate) fn unresolved(&self) -> &[String] {
        &self.unresolved
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

    /// Whether `principal`'s rights are everyone's: `public`, and an
    /// application role, which any service that knows its password enters.
    pub(crate) fn is_everyones(&self, principal: &str) -> bool {
        principal.eq_ignore_ascii_case("public")
            || self
                .catalog
                .principal(principal)
                .is_some_and(|p| p.kind == PrincipalKind::ApplicationRole)
    }

    /// The service principals that hold whatever `principal` holds: itself,
    /// the members of a role, everyone for `public` and application roles.
    pub(crate) fn services_reached_by(&self, principal: &str) -> Vec<String> {
        if self.is_everyones(principal) {
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

    /// Whether owning something gives a service control of it. dbo owns the
    /// fence by design; a service that is dbo is FP015's, where the fix is
    /// not to re-own the fence to dbo.
    pub(crate) fn owner_is_service(&self, owner: &str) -> bool {
        !owner.eq_ignore_ascii_case("dbo") && !self.services_reached_by(owner).is_empty()
    }

    /// Whether `principal` is a service principal.
    pub(crate) fn is_service(&self, principal: &str) -> bool {
        self.service.contains_key(&principal.to_lowercase())
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

    /// The owner of the fence tables: what every chain to them starts from.
    pub(crate) fn tables_owner(&self) -> Option<&'a str> {
        self.catalog.schema_owner(&self.policy.fence_schema)
    }

    /// Whether `object` is a shipped procedure: named as one, and not a
    /// case variant standing beside the one spelled as shipped.
    pub(crate) fn is_shipped(&self, object: &Object) -> bool {
        object.kind == ObjectKind::Procedure
            && self
                .policy
                .procedure(&object.qualified_name())
                .is_some_and(|p| self.catalog.object(&p.name).is_some_and(|o| std::ptr::eq(o, object)))
    }

    /// The roles `principal` is in, directly or through nested roles,
    /// lower-cased; `public` is implied and not listed.
    pub(crate) fn roles_of(&self, principal: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut queue = vec![principal.to_lowercase()];
        while let Some(p) = queue.pop() {
            for m in &self.catalog.memberships {
                if m.member.eq_ignore_ascii_case(&p) && seen.insert(m.role.to_lowercase()) {
                    queue.push(m.role.to_lowercase());
                }
            }
        }
        seen
    }

    /// The memberships and the rights to drop them, from `compute` the
    /// first time it is asked.
    pub(crate) fn drops(&self, compute: impl FnOnce() -> Drops) -> Rc<Drops> {
        Rc::clone(self.drops.get_or_init(|| Rc::new(compute())))
    }

    /// `principal` and every role it is in, lower-cased: whoever's grants it
    /// holds.
    pub(crate) fn holders(&self, principal: &str) -> BTreeSet<String> {
        let mut holders = self.roles_of(principal);
        holders.insert(principal.to_lowercase());
        holders.insert("public".into());
        holders
    }

    /// Whether `principal` administers the database: `dbo`, in `db_owner`,
    /// or holding CONTROL on the database. Those pass every check here by
    /// design (the deploy login is one); the rules name the services among
    /// them, and who else holds a path to the fence.
    pub(crate) fn is_admin(&self, principal: &str) -> bool {
        let controllers = self.controllers.get_or_init(|| {
            self.grants()
                .filter(|p| self.is_database_control(p))
                .map(|p| p.grantee.to_lowercase())
                .collect()
        });
        let holders = self.holders(principal);
        principal.eq_ignore_ascii_case("dbo")
            || holders.contains("db_owner")
            || holders.iter().any(|h| controllers.contains(h))
    }

    /// Whether `p` is CONTROL on the database, or a permission that implies
    /// it: every right in the database, an administrator's.
    pub(crate) fn is_database_control(&self, p: &Permission) -> bool {
        p.on == Securable::Database && self.implies(p, "DATABASE", "CONTROL")
    }

    /// The securable class of `on`, as the permission hierarchy names it
    /// (`DATABASE`, `SCHEMA`, `OBJECT`, `USER`, `ROLE`, `CERTIFICATE`, ...).
    pub(crate) fn class_of(&self, on: &Securable) -> String {
        match on {
            Securable::Database => "DATABASE".into(),
            Securable::Schema { .. } => "SCHEMA".into(),
            Securable::Object { .. } => "OBJECT".into(),
            Securable::Principal { name } => self.principal_class(name).into(),
            Securable::Key { key, .. } => hierarchy::class_name(key),
            Securable::Other { class_desc, .. } => hierarchy::class_name(class_desc),
        }
    }

    /// Whether grant `p` gives `wanted` on securables of class `class` that
    /// it reaches, by SQL Server's permission hierarchy: `p` itself, a
    /// covering permission (CONTROL covers ALTER), or a permission on a
    /// containing class (ALTER ANY SCHEMA on the database is ALTER on every
    /// schema and every object in it).
    pub(crate) fn implies(&self, p: &Permission, class: &str, wanted: &str) -> bool {
        hierarchy::implies(&self.class_of(&p.on), &p.permission, class, wanted)
    }

    /// The first of `wanted` that `p` gives on securables of class `class`.
    pub(crate) fn implies_any<'w>(&self, p: &Permission, class: &str, wanted: &[&'w str]) -> Option<&'w str> {
        wanted.iter().copied().find(|w| self.implies(p, class, w))
    }

    /// Whether a permission on `on` reaches `target`: the same securable, or
    /// one that contains it (the database contains everything in it, a
    /// schema its objects; a column permission reaches its table).
    pub(crate) fn contains(&self, on: &Securable, target: &Securable) -> bool {
        let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        match (on, target) {
            (Securable::Database, _) => true,
            (Securable::Schema { schema }, Securable::Schema { schema: t }) => same(schema, t),
            (Securable::Schema { schema }, Securable::Object { schema: t, .. }) => same(schema, t),
            (
                Securable::Object { schema, name, column },
                Securable::Object {
                    schema: ts,
                    name: tn,
                    column: tc,
                },
            ) => {
                same(schema, ts)
                    && same(name, tn)
                    && match (column, tc) {
                        (Some(c), Some(t)) => same(c, t),
                        _ => true,
                    }
            }
            (Securable::Principal { name }, Securable::Principal { name: t }) => same(name, t),
            (Securable::Key { key, name }, Securable::Key { key: tk, name: tn }) => same(key, tk) && same(name, tn),
            (
                Securable::Other {
                    class_desc,
                    name: Some(name),
                },
                Securable::Other {
                    class_desc: tc,
                    name: Some(tn),
                },
            ) => same(class_desc, tc) && same(name, tn),
            _ => false,
        }
    }

    /// Whether grant `p` gives `wanted` on `target`: it is on `target` or on
    /// what contains it, and its permission implies `wanted` there.
    pub(crate) fn reaches(&self, p: &Permission, target: &Securable, wanted: &str) -> bool {
        self.contains(&p.on, target) && self.implies(p, &self.class_of(target), wanted)
    }

    /// `, which implies X` when `p` is judged for a permission it does not
    /// name: the finding says why a covering permission counts.
    pub(crate) fn implied(&self, p: &Permission, wanted: &str, on: &str) -> String {
        if p.permission.eq_ignore_ascii_case(wanted) {
            String::new()
        } else {
            format!(" (it implies {wanted} on {on})")
        }
    }

    /// Granted (not denied) permissions.
    pub(crate) fn grants(&self) -> impl Iterator<Item = &'a Permission> {
        self.catalog
            .permissions
            .iter()
            .filter(|p| p.state != PermissionState::Deny)
    }

    /// The database principal named `name`, ASCII case ignored.
    pub(crate) fn principal(&self, name: &str) -> Option<&'a Principal> {
        self.principals.get(&name.to_ascii_lowercase()).copied()
    }

    /// `USER::x`, `ROLE::x` or `APPLICATION ROLE::x`, as a fix statement needs.
    pub(crate) fn principal_class(&self, name: &str) -> &'static str {
        match self.principal(name).map(|p| p.kind) {
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
            Securable::Key { key, name } => format!("{key}::{name}"),
            Securable::Other { class_desc, name } => match name {
                Some(name) => format!("{class_desc}::{name}"),
                None => class_desc.clone(),
            },
        }
    }

    /// The REVOKE that takes `p` away (with CASCADE when it was grantable).
    pub(crate) fn revoke(&self, p: &Permission) -> String {
        let on = match &p.on {
            Securable::Database => String::new(),
            Securable::Schema { schema } => format!(" ON SCHEMA::{}", quote_name(schema)),
            Securable::Object { schema, name, column } => format!(
                " ON OBJECT::{}{}",
                quote_qualified(schema, name),
                column
                    .as_deref()
                    .map(|c| format!(" ({})", quote_name(c)))
                    .unwrap_or_default()
            ),
            Securable::Principal { name } => {
                format!(" ON {}::{}", self.principal_class(name), quote_name(name))
            }
            Securable::Key { key, name } => format!(" ON {key}::{}", quote_name(name)),
            Securable::Other { class_desc, name } => {
                format!(" ON {class_desc}::{}", quote_name(name.as_deref().unwrap_or("?")))
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
            quote_name(&p.grantee)
        )
    }

    /// A finding about permission row `p`, with the REVOKE as its fix.
    pub(crate) fn grant_finding(&self, rule: Rule, p: &Permission, why: &str) -> Finding {
        Finding {
            path: Vec::new(),
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
        } else if self.is_everyones(principal) && !principal.eq_ignore_ascii_case("public") {
            format!(
                " (an application role: every service that knows its password holds it, {})",
                reached.join(", ")
            )
        } else {
            format!(
                " (held through {principal} by service principals {})",
                reached.join(", ")
            )
        }
    }
}
