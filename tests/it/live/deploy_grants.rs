//! `migrate --grant` and `fencepost.toml` environments on a live engine: a
//! user is added to a fence role once, a second run changes nothing, a user
//! that does not exist stops the run by name, and an environment finds its
//! connection string in the variable it names.

use crate::support;

use std::process::Output;

use support::TestDatabase;

async fn fencepost(args: &[&str], env: &[(&str, &str)], dir: Option<&std::path::Path>) -> Output {
    let mut command = support::binary::tokio(support::binary::fencepost(args));
    for (name, value) in env {
        command.env(name, value);
    }
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    command.output().await.expect("run fencepost")
}

async fn members_of(db: &TestDatabase, role: &str) -> Vec<String> {
    db.query(&format!(
        "SELECT m.name FROM sys.database_role_members AS rm \
           JOIN sys.database_principals AS r ON r.principal_id = rm.role_principal_id \
           JOIN sys.database_principals AS m ON m.principal_id = rm.member_principal_id \
          WHERE r.name = N'{role}' ORDER BY m.name;"
    ))
    .await
    .iter()
    .map(|row| row.get::<&str, usize>(0).unwrap().to_string())
    .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn grant_adds_a_user_to_a_fence_role_once() {
    let Some(db) = TestDatabase::deployed("grant_adds_a_user_to_a_fence_role_once").await else {
        return;
    };
    // A principal whose name needs quoting: spliced, it would break the
    // statement. A role, since Babelfish has no users without a login; a
    // role joins a role as a user does. (Babelfish 4.2 mangles a quote inside
    // a bracketed member name of ALTER ROLE, so the name has a space only.)
    db.exec("CREATE ROLE [svc reports];").await;
    let user = "svc reports";
    let grant = format!("fence_service={user}");
    let ado = db.ado();

    let first = fencepost(
        &["migrate", "--grant", &grant, "--format", "json", "--connection", &ado],
        &[],
        None,
    )
    .await;
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let report: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(report["grants"][0]["added"], true, "{report}");
    assert_eq!(members_of(&db, "fence_service").await, [user]);

    let second = fencepost(&["migrate", "--grant", &grant, "--connection", &ado], &[], None).await;
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    assert!(
        text(&second.stdout).contains(&format!("{user} is already a member of fence_service")),
        "{}",
        text(&second.stdout)
    );
    assert_eq!(members_of(&db, "fence_service").await, [user]);
    db.drop().await;
}

/// Babelfish 4.2's refusal of a bracketed name holding `]]` (the escaped
/// `]`): its parser has no such escape.
const BABELFISH_NO_BRACKET_ESCAPE: [support::refusal::Refusal; 1] = [(33557097, "syntax error at or near \"]\"")];

#[tokio::test]
async fn a_member_whose_name_holds_a_closing_bracket_and_a_quote_is_quoted_not_spliced() {
    let test = "a_member_whose_name_holds_a_closing_bracket_and_a_quote_is_quoted_not_spliced";
    // Spliced into `ADD MEMBER [...]`, the `]` would end the name and the
    // rest would run as T-SQL.
    let create = "CREATE ROLE [svc]]o'ps];";
    let Some(db) = support::refusal::deployed_unless_refused(test, &BABELFISH_NO_BRACKET_ESCAPE, create).await else {
        return;
    };
    db.exec(create).await;
    let user = "svc]o'ps";
    let grant = format!("fence_service={user}");
    let added = fencepost(
        &[
            "migrate",
            "--grant",
            &grant,
            "--format",
            "json",
            "--connection",
            &db.ado(),
        ],
        &[],
        None,
    )
    .await;
    assert_eq!(added.status.code(), Some(0), "{}", text(&added.stderr));
    let report: serde_json::Value = serde_json::from_slice(&added.stdout).unwrap();
    assert_eq!(report["grants"][0]["added"], true, "{report}");
    assert_eq!(members_of(&db, "fence_service").await, [user]);
    db.drop().await;
}

#[tokio::test]
async fn a_grant_to_a_user_that_does_not_exist_stops_naming_it() {
    let Some(db) = TestDatabase::deployed("a_grant_to_a_user_that_does_not_exist_stops_naming_it").await else {
        return;
    };
    let output = fencepost(
        &[
            "migrate",
            "--grant",
            "fence_reader=nobody_here",
            "--format",
            "json",
            "--connection",
            &db.ado(),
        ],
        &[],
        None,
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let message = document["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("nobody_here") && message.contains("CREATE USER"),
        "{message}"
    );
    assert!(members_of(&db, "fence_reader").await.is_empty());
    db.drop().await;
}

#[tokio::test]
async fn an_environment_reads_its_connection_and_grants_from_fencepost_toml_and_a_grant_flag_replaces_them() {
    let Some(mut db) = TestDatabase::new(
        "an_environment_reads_its_connection_and_grants_from_fencepost_toml_and_a_grant_flag_replaces_them",
    )
    .await
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fencepost.toml"),
        "[environments.staging]\nconnection_env = \"STAGING_DB\"\ngrants.fence_operator = [\"oncall\"]\n",
    )
    .unwrap();
    // A role standing in for the on-call users (Babelfish has no users
    // without a login).
    db.exec("CREATE ROLE oncall;").await;
    let ado = db.ado();

    let missing = fencepost(&["migrate", "--environment", "staging"], &[], Some(dir.path())).await;
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("STAGING_DB"),
        "{}",
        text(&missing.stderr)
    );

    let deployed = fencepost(&["migrate", "-e", "staging"], &[("STAGING_DB", &ado)], Some(dir.path())).await;
    assert_eq!(deployed.status.code(), Some(0), "{}", text(&deployed.stderr));
    assert!(
        text(&deployed.stdout).contains("added oncall to fence_operator"),
        "{}",
        text(&deployed.stdout)
    );
    assert_eq!(members_of(&db, "fence_operator").await, ["oncall"]);

    // A --grant replaces the environment's grants: its user is added, the
    // file's is not.
    std::fs::write(
        dir.path().join("fencepost.toml"),
        "[environments.staging]\nconnection_env = \"STAGING_DB\"\ngrants.fence_operator = [\"oncall_too\"]\n",
    )
    .unwrap();
    db.exec("CREATE ROLE oncall_too; CREATE ROLE report_readers;").await;
    let flagged = fencepost(
        &["migrate", "-e", "staging", "--grant", "fence_reader=report_readers"],
        &[("STAGING_DB", &ado)],
        Some(dir.path()),
    )
    .await;
    assert_eq!(flagged.status.code(), Some(0), "{}", text(&flagged.stderr));
    assert_eq!(members_of(&db, "fence_reader").await, ["report_readers"]);
    assert_eq!(
        members_of(&db, "fence_operator").await,
        ["oncall"],
        "the file's grant was applied beside --grant"
    );

    // `check` audits an environment's users as services: one the database
    // does not have is an error naming it.
    std::fs::write(
        dir.path().join("fencepost.toml"),
        "[environments.staging]\nconnection_env = \"STAGING_DB\"\ngrants.fence_service = [\"ghost_service\"]\n",
    )
    .unwrap();
    let check = fencepost(&["check", "-e", "staging"], &[("STAGING_DB", &ado)], Some(dir.path())).await;
    assert_eq!(check.status.code(), Some(2), "{}", text(&check.stdout));
    assert!(text(&check.stderr).contains("ghost_service"), "{}", text(&check.stderr));

    // One it has is audited as a service though in no fence role: its
    // default schema, owned by another user, is a way for that user's code
    // to stand in for what it calls.
    let service = support::user_of(&db.login_in_role(None).await);
    let other = support::user_of(&db.login_in_role(None).await);
    db.exec(&format!("CREATE SCHEMA tools AUTHORIZATION [{other}];")).await;
    db.exec(&format!("ALTER USER [{service}] WITH DEFAULT_SCHEMA = tools;"))
        .await;
    let names_the_service = |output: &Output| {
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        report["findings"].as_array().unwrap().iter().any(|f| {
            f["object"] == "SCHEMA::tools"
                && f["principal"]
                    .as_str()
                    .is_some_and(|p| p.eq_ignore_ascii_case(&service))
        })
    };
    let unnamed = fencepost(&["check", "--format", "json", "--connection", &ado], &[], None).await;
    assert!(
        !names_the_service(&unnamed),
        "check named a user no one said is a service: {}",
        text(&unnamed.stdout)
    );
    std::fs::write(
        dir.path().join("fencepost.toml"),
        format!("[environments.staging]\nconnection_env = \"STAGING_DB\"\ngrants.fence_service = [\"{service}\"]\n"),
    )
    .unwrap();
    let named = fencepost(
        &["check", "-e", "staging", "--format", "json"],
        &[("STAGING_DB", &ado)],
        Some(dir.path()),
    )
    .await;
    assert_eq!(named.status.code(), Some(1), "{}", text(&named.stderr));
    assert!(
        names_the_service(&named),
        "check -e did not audit the environment's service: {}",
        text(&named.stdout)
    );
    db.drop().await;
}

#[tokio::test]
async fn grant_refuses_to_put_the_deploying_user_in_a_fence_role() {
    let test = "grant_refuses_to_put_the_deploying_user_in_a_fence_role";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    // The test login is sysadmin: in the database it is dbo.
    let ado = db.ado();
    let run = fencepost(
        &["migrate", "--grant", "fence_operator=dbo", "--connection", &ado],
        &[],
        None,
    )
    .await;
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refusing to add dbo to fence_operator: dbo is the user this deploy runs as"),
        "{stderr}"
    );
    // Refused before anything was deployed.
    let history = db
        .query("SELECT CASE WHEN OBJECT_ID(N'fence.SchemaHistory') IS NULL THEN 0 ELSE 1 END;")
        .await;
    assert_eq!(history[0].get::<i32, usize>(0), Some(0), "{stderr}");
    db.drop().await;
}
