//! The client's check of its own least privilege at start-up: a login that
//! can update the fence table, or that enters as `dbo`, writes past the fence
//! whenever it likes, so a lease taken with it fences nothing.

/// Asks the server who the session is in the database and whether it may
/// update `fence.Resource` (NULL where the table is missing: the contract
/// check names that).
pub(crate) const PRIVILEGE_QUERY: &str = "\
SELECT CAST(USER_NAME() AS nvarchar(256)) AS UserName, \
       CAST(HAS_PERMS_BY_NAME(N'fence.Resource', N'OBJECT', N'UPDATE') AS int) AS CanUpdate";

/// What is wrong with the session's rights, one entry per reason; empty
/// when it holds no more than a service should.
pub(crate) fn excess(user: Option<&str>, can_update: Option<i32>) -> Vec<String> {
    let mut problems = Vec::new();
    if user.is_some_and(|u| u.eq_ignore_ascii_case("dbo")) {
        problems.push(
            "it enters the database as dbo (the database owner, a sysadmin, or an Azure SQL admin), which passes \
             every permission check"
                .to_string(),
        );
    }
    if can_update == Some(1) {
        problems.push("it holds UPDATE on fence.Resource (HAS_PERMS_BY_NAME)".to_string());
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_user_without_update_has_no_excess() {
        assert!(excess(Some("orders_svc"), Some(0)).is_empty());
        assert!(excess(Some("orders_svc"), None).is_empty());
    }

    #[test]
    fn dbo_and_update_on_the_fence_table_are_each_named() {
        assert_eq!(excess(Some("dbo"), Some(1)).len(), 2);
        assert!(excess(Some("DBO"), Some(0))[0].contains("dbo"));
        assert!(excess(Some("writer"), Some(1))[0].contains("UPDATE on fence.Resource"));
    }
}
