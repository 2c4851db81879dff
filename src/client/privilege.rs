//! The client's check of its own least privilege at start-up: a login that
//! can write the fence tables, redefine the fence procedures, or that enters
//! as `dbo`, writes past the fence whenever it likes, so a lease taken with
//! it fences nothing.
//!
//! It is a quick check of the session's own effective rights, not a proof:
//! `fencepost check` reads the whole permission model (roles, ownership,
//! impersonation, server-level rights) and is what a deploy pipeline runs.

/// One right the session must not hold: a name for messages, and the
/// securable, class and permission `HAS_PERMS_BY_NAME` is asked about (which
/// counts implied rights: CONTROL implies ALTER, db_owner implies all).
struct Right {
    column: &'static str,
    securable: Option<&'static str>,
    class: &'static str,
    permission: &'static str,
}

const fn object(column: &'static str, table: &'static str, permission: &'static str) -> Right {
    Right {
        column,
        securable: Some(table),
        class: "OBJECT",
        permission,
    }
}

const fn schema(column: &'static str, name: &'static str, permission: &'static str) -> Right {
    Right {
        column,
        securable: Some(name),
        class: "SCHEMA",
        permission,
    }
}

/// Writing a fence table directly, redefining or adding code in a fence
/// schema, or controlling the whole database.
const RIGHTS: [Right; 14] = [
    object("UpdateResource", "fence.Resource", "UPDATE"),
    object("InsertResource", "fence.Resource", "INSERT"),
    object("DeleteResource", "fence.Resource", "DELETE"),
    object("UpdatePublishedOperation", "fence.PublishedOperation", "UPDATE"),
    object("InsertPublishedOperation", "fence.PublishedOperation", "INSERT"),
    object("DeletePublishedOperation", "fence.PublishedOperation", "DELETE"),
    object("UpdateTenure", "fence.Tenure", "UPDATE"),
    object("InsertTenure", "fence.Tenure", "INSERT"),
    object("DeleteTenure", "fence.Tenure", "DELETE"),
    schema("AlterFence", "fence", "ALTER"),
    schema("AlterFenceApi", "fence_api", "ALTER"),
    schema("AlterFenceAdmin", "fence_admin", "ALTER"),
    Right {
        column: "ControlDatabase",
        securable: None,
        class: "DATABASE",
        permission: "CONTROL",
    },
    Right {
        column: "AlterAnySchema",
        securable: None,
        class: "DATABASE",
        permission: "ALTER ANY SCHEMA",
    },
];

impl Right {
    fn expression(&self) -> String {
        let securable = self.securable.map_or("NULL".to_string(), |name| format!("N'{name}'"));
        format!(
            "CAST(HAS_PERMS_BY_NAME({securable}, N'{}', N'{}') AS int) AS {}",
            self.class, self.permission, self.column
        )
    }

    fn describe(&self) -> String {
        match self.securable {
            Some(name) if self.class == "SCHEMA" => {
                format!("it holds {} on schema {name} (HAS_PERMS_BY_NAME)", self.permission)
            }
            Some(name) => format!("it holds {} on {name} (HAS_PERMS_BY_NAME)", self.permission),
            None => format!("it holds {} on the database (HAS_PERMS_BY_NAME)", self.permission),
        }
    }
}

/// Asks the server who the session is in the database and, for each right
/// in [`RIGHTS`], whether it holds it (NULL where the securable is missing:
/// the contract check names that).
pub(crate) fn privilege_query() -> String {
    let rights: Vec<String> = RIGHTS.iter().map(Right::expression).collect();
    format!(
        "SELECT CAST(USER_NAME() AS nvarchar(256)) AS UserName, {}",
        rights.join(", ")
    )
}

/// What is wrong with the session's rights, one entry per reason; empty
/// when it holds no more than a service should. `held` answers each right's
/// column of [`privilege_query`].
pub(crate) fn excess(user: Option<&str>, held: impl Fn(&str) -> Option<i32>) -> Vec<String> {
    let mut problems = Vec::new();
    if user.is_some_and(|u| u.eq_ignore_ascii_case("dbo")) {
        problems.push(
            "it enters the database as dbo (the database owner, a sysadmin, or an Azure SQL admin), which passes \
             every permission check"
                .to_string(),
        );
        return problems;
    }
    for right in &RIGHTS {
        if held(right.column) == Some(1) {
            problems.push(right.describe());
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_user_without_any_of_the_rights_has_no_excess() {
        assert!(excess(Some("orders_svc"), |_| Some(0)).is_empty());
        assert!(excess(Some("orders_svc"), |_| None).is_empty());
    }

    #[test]
    fn dbo_is_named_once_for_all_it_implies() {
        let found = excess(Some("DBO"), |_| Some(1));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("dbo"));
    }

    #[test]
    fn each_right_is_named_with_its_securable() {
        let found = excess(Some("writer"), |column| Some(i32::from(column == "UpdateResource")));
        assert_eq!(found, ["it holds UPDATE on fence.Resource (HAS_PERMS_BY_NAME)"]);
        let found = excess(Some("ddl"), |column| Some(i32::from(column == "AlterFenceApi")));
        assert_eq!(found, ["it holds ALTER on schema fence_api (HAS_PERMS_BY_NAME)"]);
        let found = excess(Some("deleter"), |column| Some(i32::from(column == "DeleteTenure")));
        assert_eq!(found, ["it holds DELETE on fence.Tenure (HAS_PERMS_BY_NAME)"]);
        let found = excess(Some("owner"), |column| Some(i32::from(column == "ControlDatabase")));
        assert_eq!(found, ["it holds CONTROL on the database (HAS_PERMS_BY_NAME)"]);
    }

    #[test]
    fn the_query_asks_about_every_right_by_its_column() {
        let query = privilege_query();
        for right in &RIGHTS {
            assert!(
                query.contains(&format!(" AS {}", right.column)),
                "{}: {query}",
                right.column
            );
        }
    }
}
