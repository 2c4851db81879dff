//! The rights section of `status` and `migrate --dry-run`: what the next
//! deploy needs that the login lacks, and the statements a DBA runs.

use fencepost::deploy::DeployRights;

/// The section's lines; `indent` prefixes each.
pub fn render_rights(rights: &DeployRights, indent: &str) -> String {
    let user = &rights.user;
    let mut out = String::new();
    if rights.missing.is_empty() {
        out += &format!("{indent}rights: {user} holds every right the next deploy needs\n");
    } else {
        out += &format!(
            "{indent}rights: {user} lacks {} right(s) the next deploy needs; `fencepost migrate` stops before \
             changing anything until they are granted:\n",
            rights.missing.len()
        );
        for right in &rights.missing {
            out += &format!(
                "{indent}  {} on {}: {}\n",
                right.permission, right.securable, right.needed_for
            );
        }
        let path = match rights.after_schemas.is_empty() {
            true => "",
            false => {
                " (the one-step path: the fence schemas do not exist yet, so these are database-wide rights, close to db_owner)"
            }
        };
        out += &format!("{indent}a DBA grants them with{path}:\n");
        for grant in rights.grants() {
            out += &format!("{indent}  {grant}\n");
        }
        for note in &rights.notes {
            out += &format!("{indent}note: {note}\n");
        }
        if !rights.after_schemas.is_empty() {
            out += &format!(
                "{indent}or, the two-step path: a DBA runs `fencepost script --schemas` first, then grants only:\n"
            );
            for grant in rights.grants_after_schemas() {
                out += &format!("{indent}  {grant}\n");
            }
        }
    }
    if !rights.unverified.is_empty() {
        out += &format!("{indent}rights: the engine did not say whether {user} holds these (not a reason to stop):\n");
        for right in &rights.unverified {
            out += &format!(
                "{indent}  {} on {}: {}\n",
                right.permission, right.securable, right.needed_for
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use fencepost::deploy::MissingRight;

    use super::*;

    fn right(permission: &str, securable: &str, grant: &str) -> MissingRight {
        MissingRight {
            permission: permission.into(),
            securable: securable.into(),
            needed_for: "creating things".into(),
            grant: grant.into(),
        }
    }

    #[test]
    fn each_missing_right_is_named_with_its_securable_and_each_grant_once() {
        let rights = DeployRights {
            user: "deployer".into(),
            missing: vec![
                right("CREATE SCHEMA", "DATABASE::[app]", "GRANT CREATE SCHEMA TO [deployer];"),
                right(
                    "ALTER",
                    "SCHEMA::[fence]",
                    "GRANT ALTER ON SCHEMA::[fence] TO [deployer];",
                ),
                right(
                    "ALTER",
                    "SCHEMA::[fence]",
                    "GRANT ALTER ON SCHEMA::[fence] TO [deployer];",
                ),
            ],
            unverified: vec![right(
                "CONTROL",
                "SCHEMA::[fence]",
                "GRANT CONTROL ON SCHEMA::[fence] TO [deployer];",
            )],
            ..DeployRights::default()
        };
        assert_eq!(
            render_rights(&rights, ""),
            "rights: deployer lacks 3 right(s) the next deploy needs; `fencepost migrate` stops before changing \
             anything until they are granted:\n  CREATE SCHEMA on DATABASE::[app]: creating things\n  \
             ALTER on SCHEMA::[fence]: creating things\n  ALTER on SCHEMA::[fence]: creating things\n\
             a DBA grants them with:\n  GRANT CREATE SCHEMA TO [deployer];\n  \
             GRANT ALTER ON SCHEMA::[fence] TO [deployer];\n\
             rights: the engine did not say whether deployer holds these (not a reason to stop):\n  \
             CONTROL on SCHEMA::[fence]: creating things\n"
        );
    }

    #[test]
    fn on_a_fresh_database_the_message_says_which_path_it_prints_and_gives_the_other() {
        let rights = DeployRights {
            user: "deployer".into(),
            missing: vec![right("INSERT", "DATABASE::[app]", "GRANT INSERT TO [deployer];")],
            after_schemas: vec![right(
                "INSERT",
                "SCHEMA::[fence]",
                "GRANT INSERT ON SCHEMA::[fence] TO [deployer];",
            )],
            notes: vec!["the fence schemas do not exist yet".into()],
            ..DeployRights::default()
        };
        let said = render_rights(&rights, "");
        assert!(said.contains("a DBA grants them with (the one-step path"), "{said}");
        assert!(said.contains("note: the fence schemas do not exist yet\n"), "{said}");
        assert!(
            said.ends_with(
                "or, the two-step path: a DBA runs `fencepost script --schemas` first, then grants only:\n  \
                 GRANT INSERT ON SCHEMA::[fence] TO [deployer];\n"
            ),
            "{said}"
        );
    }

    #[test]
    fn a_login_that_lacks_nothing_is_told_so() {
        let rights = DeployRights {
            user: "dbo".into(),
            ..DeployRights::default()
        };
        assert_eq!(
            render_rights(&rights, "  "),
            "  rights: dbo holds every right the next deploy needs\n"
        );
    }
}
