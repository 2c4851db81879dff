//! `check --offline`: the rules that need no server, applied to the T-SQL that
//! ships. Every GRANT is EXECUTE on a shipped procedure to a fence role, each
//! role gets only its procedures, no procedure uses dynamic SQL or `EXECUTE
//! AS`, and every `fence_api` procedure is granted to `fence_service`.

use super::catalog::{Permission, PermissionState, Securable};
use super::module_text::{dynamic_constructs, words};
use super::{Finding, Policy, Report, Rule};
use crate::tsql::{code_only, quote_name, quote_qualified, without_comments};

/// The schema whose procedures every service needs.
const API_SCHEMA: &str = "fence_api";
/// The role services are put in.
const SERVICE_ROLE: &str = "fence_service";

/// One shipped script: its file name and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// File name, such as `fence_api.Acquire.sql` or `020_fence_service.sql`.
    pub name: String,
    /// The T-SQL.
    pub text: String,
}

impl Source {
    /// A script called `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }
}

/// The shipped T-SQL that `check --offline` reads: the procedure and
/// permission scripts, as names and texts. What a deploy ships, migrations
/// and all, is a [`source::Sources`](crate::source::Sources); this is made
/// from one with `From`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShippedScripts {
    /// `procedures/`: one procedure per script.
    pub procedures: Vec<Source>,
    /// `permissions/`: roles and grants.
    pub permissions: Vec<Source>,
}

/// The scripts a deploy ships, as `check --offline` reads them.
impl From<&crate::source::Sources> for ShippedScripts {
    fn from(shipped: &crate::source::Sources) -> Self {
        Self {
            procedures: shipped
                .procedures()
                .iter()
                .map(|p| Source::new(p.file(), p.text()))
                .collect(),
            permissions: shipped
                .permissions()
                .iter()
                .map(|p| Source::new(p.file(), p.text()))
                .collect(),
        }
    }
}

/// The former name of [`ShippedScripts`], kept so code written against 0.1
/// still compiles; it read as a second [`source::Sources`](crate::source::Sources).
#[deprecated(note = "renamed ShippedScripts")]
pub type Sources = ShippedScripts;

/// A GRANT statement as written.
#[derive(Debug)]
struct Grant {
    script: String,
    permissions: Vec<String>,
    /// `None` for a database-wide grant; `SCHEMA::x` or `schema.name` otherwise.
    on: Option<String>,
    grantees: Vec<String>,
}

/// Applies the offline rules to the shipped sources.
pub fn lint_offline(sources: &ShippedScripts, policy: &Policy) -> Report {
    let mut report = Report {
        target: "shipped sources".into(),
        rules_checked: Rule::OFFLINE.to_vec(),
        ..Report::default()
    };
    let procedures: Vec<(String, &Source)> = sources.procedures.iter().map(|s| (procedure_name(s), s)).collect();
    for (name, source) in &procedures {
        let found = dynamic_constructs(&source.text);
        if !found.is_empty() {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::DynamicSql,
                principal: None,
                object: name.clone(),
                permission: Some(found.join(", ")),
                why: format!(
                    "procedures/{} runs SQL built at run time or as another principal, so what it can do to \
                     the fence is not what the shipped text shows",
                    source.name
                ),
                fix: format!("rewrite procedures/{} without {}", source.name, found.join(" or ")),
            });
        }
    }
    let grants: Vec<Grant> = sources.permissions.iter().flat_map(grants_in).collect();
    for grant in &grants {
        check_grant(grant, &procedures, policy, &mut report);
    }
    for (name, source) in &procedures {
        let in_api = name
            .split_once('.')
            .is_some_and(|(s, _)| s.eq_ignore_ascii_case(API_SCHEMA));
        let granted = grants.iter().any(|g| {
            g.on.as_deref().is_some_and(|on| on.eq_ignore_ascii_case(name))
                && g.permissions.iter().any(|p| p == "execute")
                && g.grantees.iter().any(|r| r.eq_ignore_ascii_case(SERVICE_ROLE))
        });
        if in_api && !granted {
            let (schema, proc) = name.split_once('.').unwrap_or((API_SCHEMA, name));
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::ServiceGrantMissing,
                principal: Some(SERVICE_ROLE.into()),
                object: name.clone(),
                permission: Some("EXECUTE".into()),
                why: format!(
                    "procedures/{} ships in {API_SCHEMA} but no permission script grants it to {SERVICE_ROLE}, so \
                     services cannot call it",
                    source.name
                ),
                fix: format!(
                    "GRANT EXECUTE ON {} TO {};",
                    quote_qualified(schema, proc),
                    quote_name(SERVICE_ROLE)
                ),
            });
        }
    }
    report.normalize()
}

fn check_grant(grant: &Grant, procedures: &[(String, &Source)], policy: &Policy, report: &mut Report) {
    let shipped = grant.on.as_deref().and_then(|on| {
        procedures
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(on))
            .map(|(n, _)| n.clone())
    });
    let perms = grant.permissions.join(", ").to_uppercase();
    let on = grant.on.clone().unwrap_or_else(|| "DATABASE".into());
    for grantee in &grant.grantees {
        let fence_role = policy.service_roles.iter().any(|r| r.eq_ignore_ascii_case(grantee));
        let proc = match (&shipped, fence_role, grant.permissions.as_slice()) {
            (Some(proc), true, [p]) if p == "execute" => proc,
            _ => {
                report.findings.push(Finding {
                    path: Vec::new(),
                    rule: Rule::ShippedGrant,
                    principal: Some(grantee.clone()),
                    object: on.clone(),
                    permission: Some(perms.clone()),
                    why: format!(
                        "permissions/{} grants {perms} on {on} to {grantee}; the only grants that ship are \
                         EXECUTE on a shipped procedure, one by one, to a fence role",
                        grant.script
                    ),
                    fix: format!("remove the GRANT from permissions/{}", grant.script),
                });
                continue;
            }
        };
        let allowed = policy
            .procedure(proc)
            .is_some_and(|p| p.granted_to.iter().any(|r| r.eq_ignore_ascii_case(grantee)));
        if !allowed {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::ExecuteBeyondRole,
                principal: Some(grantee.clone()),
                object: proc.clone(),
                permission: Some("EXECUTE".into()),
                why: format!(
                    "permissions/{} grants {proc} to {grantee}, which the role layout does not give it",
                    grant.script
                ),
                fix: format!(
                    "remove the GRANT from permissions/{}, or add it to the role layout",
                    grant.script
                ),
            });
        }
    }
}

/// The procedure a script creates, else its file name without `.sql`.
fn procedure_name(source: &Source) -> String {
    let w = words(&code_only(&source.text));
    let created = w.windows(3).find_map(|win| match win {
        [c, p, name] if c == "create" && (p == "procedure" || p == "proc") => Some(name.clone()),
        _ => None,
    });
    let file = source.name.rsplit(['/', '\\']).next().unwrap_or(&source.name);
    let stem = file.strip_suffix(".sql").unwrap_or(file);
    // Keep the file's spelling when it names the same procedure.
    match created {
        Some(c) if !c.eq_ignore_ascii_case(stem) => c,
        _ => stem.to_string(),
    }
}

/// The grants the shipped permission scripts make, one per permission and
/// grantee, as `sys.database_permissions` shows them after a deploy: what a
/// clean catalog holds. Procedure names take the spelling of the script that
/// creates them.
pub fn shipped_grants(sources: &ShippedScripts) -> Vec<Permission> {
    let names: Vec<String> = sources.procedures.iter().map(procedure_name).collect();
    let mut out = Vec::new();
    for g in sources.permissions.iter().flat_map(grants_in) {
        let on = match g.on.as_deref() {
            None => Securable::Database,
            Some(on) => match on.strip_prefix("SCHEMA::") {
                Some(schema) => Securable::Schema { schema: schema.into() },
                None => {
                    let spelled = names
                        .iter()
                        .find(|n| n.eq_ignore_ascii_case(on))
                        .map_or(on, String::as_str);
                    let (schema, name) = spelled.split_once('.').unwrap_or(("dbo", spelled));
                    Securable::Object {
                        schema: schema.into(),
                        name: name.into(),
                        column: None,
                    }
                }
            },
        };
        for permission in &g.permissions {
            for grantee in &g.grantees {
                out.push(Permission {
                    grantee: grantee.clone(),
                    permission: permission.to_uppercase(),
                    state: PermissionState::Grant,
                    on: on.clone(),
                });
            }
        }
    }
    out
}

/// Every GRANT in a script, including inside strings that dynamic SQL runs.
fn grants_in(source: &Source) -> Vec<Grant> {
    let w = words(&without_comments(&source.text));
    let mut grants = Vec::new();
    let mut i = 0;
    while i < w.len() {
        if w[i] != "grant" {
            i += 1;
            continue;
        }
        i += 1;
        let mut permissions = vec![String::new()];
        while i < w.len() && w[i] != "on" && w[i] != "to" {
            if w[i] == "," {
                permissions.push(String::new());
            } else {
                let p = permissions.last_mut().expect("starts with one");
                if !p.is_empty() {
                    p.push(' ');
                }
                p.push_str(&w[i]);
            }
            i += 1;
        }
        let mut on = None;
        if i < w.len() && w[i] == "on" {
            i += 1;
            let mut target = String::new();
            while i < w.len() && w[i] != "to" {
                target.push_str(&w[i]);
                i += 1;
            }
            let target = target.strip_prefix("object::").unwrap_or(&target).to_string();
            on = Some(match target.strip_prefix("schema::") {
                Some(s) => format!("SCHEMA::{s}"),
                None => target,
            });
        }
        let mut grantees = Vec::new();
        if i < w.len() && w[i] == "to" {
            i += 1;
            while i < w.len() {
                grantees.push(w[i].clone());
                i += 1;
                if i < w.len() && w[i] == "," {
                    i += 1;
                } else {
                    break;
                }
            }
        }
        let permissions = permissions.into_iter().filter(|p| !p.is_empty()).collect();
        grants.push(Grant {
            script: source.name.clone(),
            permissions,
            on,
            grantees,
        });
    }
    grants
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_read_with_their_securable_and_grantees() {
        let g = grants_in(&Source::new(
            "x.sql",
            "-- GRANT CONTROL TO nobody\nGRANT EXECUTE ON [fence_api].[Acquire] TO fence_service;\n\
             GRANT SELECT, UPDATE ON SCHEMA::fence TO a, b;\nGRANT CREATE PROCEDURE TO c;\n\
             EXEC (N'GRANT ALTER ON OBJECT::fence.Resource TO d');",
        ));
        let shape: Vec<(Vec<String>, Option<String>, Vec<String>)> =
            g.into_iter().map(|g| (g.permissions, g.on, g.grantees)).collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shape,
            vec![
                (s(&["execute"]), Some("fence_api.acquire".into()), s(&["fence_service"])),
                (s(&["select", "update"]), Some("SCHEMA::fence".into()), s(&["a", "b"])),
                (s(&["create procedure"]), None, s(&["c"])),
                (s(&["alter"]), Some("fence.resource".into()), s(&["d"])),
            ]
        );
    }

    #[test]
    fn the_procedure_name_comes_from_its_create_statement() {
        let s = Source::new(
            "procedures/odd-file.sql",
            "-- x\nCREATE PROCEDURE [fence_api].[Acquire] AS SELECT 1",
        );
        assert_eq!(procedure_name(&s), "fence_api.acquire");
        let s = Source::new(
            "fence_api.Acquire.sql",
            "CREATE PROCEDURE fence_api.Acquire AS SELECT 1",
        );
        assert_eq!(procedure_name(&s), "fence_api.Acquire");
    }
}
