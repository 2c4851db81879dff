//! The deploying login's rights, read before a deploy changes anything:
//! `status` and `migrate --dry-run` name each right the next deploy needs and
//! the login lacks, with the statement a DBA runs, and `migrate` refuses
//! before its first change.

use crate::support;

use support::TestDatabase;
use support::refusal::{Refusal, deployed_unless_refused_by_a_user};

/// Runs the real binary against `ado`, as a pipeline would.
async fn fencepost_cli(args: &[&str], ado: &str) -> std::process::Output {
    support::binary::tokio(support::binary::fencepost_on(ado, args))
        .output()
        .await
        .expect("run fencepost")
}

/// How many of the fence schemas `db` has: a refused first deploy makes none.
async fn fence_schemas(db: &TestDatabase) -> i32 {
    let rows = db
        .query("SELECT COUNT(*) FROM sys.schemas WHERE name IN (N'fence', N'fence_api', N'fence_admin');")
        .await;
    rows[0].get::<i32, usize>(0).unwrap_or_default()
}

#[tokio::test]
async fn status_names_each_right_a_login_lacks_and_migrate_refuses_before_any_change() {
    let test = "status_names_each_right_a_login_lacks_and_migrate_refuses_before_any_change";
    let Some(mut db) = TestDatabase::new(test).await else {
        return;
    };
    let babelfish = db.is_babelfish().await;
    // A user with no role and no grant: on every engine it lacks what a first
    // deploy takes, starting with CREATE SCHEMA.
    let deployer = db.login_in_role(None).await;
    let user = support::user_of(&deployer);
    let create_schema = format!("CREATE SCHEMA on DATABASE::[{}]", db.name);
    let grant = match babelfish {
        // Babelfish grants no database-level right: the login must own the database.
        true => format!(
            "USE [{db}]; SET XACT_ABORT ON; BEGIN TRANSACTION; DROP USER [{user}]; \
             ALTER AUTHORIZATION ON DATABASE::[{db}] TO [{user}]; COMMIT TRANSACTION;",
            db = db.name
        ),
        false => format!("GRANT CREATE SCHEMA TO [{user}];"),
    };

    let status = fencepost_cli(&["status"], &deployer).await;
    let said = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("rights: {user} lacks")), "{said}");
    assert!(said.contains(&create_schema), "{said}");
    assert!(said.contains(&grant), "{said}");

    let json = fencepost_cli(&["status", "--format", "json"], &deployer).await;
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).expect("a JSON document");
    assert_eq!(document["current"], false, "{document}");
    assert_eq!(document["rights"]["user"], user.as_str(), "{document}");
    let missing = document["rights"]["missing"]
        .as_array()
        .expect("a list of missing rights");
    let schema_right = missing
        .iter()
        .find(|r| r["permission"] == "CREATE SCHEMA")
        .unwrap_or_else(|| panic!("CREATE SCHEMA missing from {document}"));
    assert_eq!(schema_right["securable"], format!("DATABASE::[{}]", db.name));
    assert_eq!(schema_right["grant"], grant.as_str());

    let dry_run = fencepost_cli(&["migrate", "--dry-run"], &deployer).await;
    let said = String::from_utf8_lossy(&dry_run.stdout);
    assert_eq!(dry_run.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&create_schema) && said.contains("a deploy would stop"),
        "{said}"
    );

    let migrate = fencepost_cli(&["migrate", "--format", "json"], &deployer).await;
    let refused = String::from_utf8_lossy(&migrate.stderr);
    assert_eq!(migrate.status.code(), Some(2), "{refused}");
    // One line of error after the progress lines.
    assert_eq!(
        refused.lines().filter(|l| l.starts_with("fencepost:")).count(),
        1,
        "{refused}"
    );
    assert!(
        refused.contains(&format!("the deploying user {user} lacks")) && refused.contains(&grant),
        "{refused}"
    );
    let document: serde_json::Value = serde_json::from_slice(&migrate.stdout).expect("a JSON error document");
    assert!(
        document["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&grant),
        "{document}"
    );
    assert_eq!(fence_schemas(&db).await, 0, "the refused deploy created a schema");

    // The statements it printed are the fix: run them, and the same login deploys.
    let grants: Vec<String> = missing
        .iter()
        .map(|r| r["grant"].as_str().unwrap().to_string())
        .collect();
    let mut fix: Vec<String> = Vec::new();
    for statement in grants {
        if !fix.contains(&statement) {
            fix.push(statement);
        }
    }
    {
        let mut admin = support::connect_ado(&db.ado()).await;
        support::exec(&mut admin, &fix.join("\n")).await;
    }
    let migrate = fencepost_cli(&["migrate"], &deployer).await;
    assert_eq!(
        migrate.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&migrate.stdout),
        String::from_utf8_lossy(&migrate.stderr)
    );
    let status = fencepost_cli(&["status"], &deployer).await;
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("holds every right the next deploy needs"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    if babelfish {
        // The login owns the database now; give it back, so the login can be dropped.
        let admin = support::user_of(&support::server_or_skip(test).expect("the engine"));
        db.exec(&format!("ALTER AUTHORIZATION ON DATABASE::[{}] TO [{admin}];", db.name))
            .await;
    }
    db.drop().await;
}

/// Babelfish has none of the fixed roles a least-privilege deployer is made
/// of.
const NO_DDLADMIN: [Refusal; 1] = [(33557097, "role \"db_ddladmin\" does not exist")];

/// A deployer that may alter procedures (db_ddladmin) but not write the
/// deploy's journal or grant EXECUTE would fail after its first change: it is
/// told each right it lacks and stopped before that change.
#[tokio::test]
async fn a_deployer_that_may_alter_procedures_but_not_record_them_is_stopped_before_the_first() {
    let test = "a_deployer_that_may_alter_procedures_but_not_record_them_is_stopped_before_the_first";
    let probe = |user: &str| format!("ALTER ROLE [db_ddladmin] ADD MEMBER [{user}];");
    let Some(mut db) = deployed_unless_refused_by_a_user(test, &NO_DDLADMIN, probe).await else {
        return;
    };
    let deployer = db.login_in_role(Some("db_ddladmin")).await;
    let user = support::user_of(&deployer);
    // It may read the fence's history (the state every deploy reads first),
    // and one procedure is to be deployed again.
    db.exec(&format!(
        "GRANT SELECT ON SCHEMA::fence TO [{user}];
         DELETE FROM fence.DeployedProcedure WHERE ProcedureName = N'fence_api.Inspect';"
    ))
    .await;
    let altered_at = "SELECT CONVERT(nvarchar(40), modify_date, 126) FROM sys.objects WHERE object_id = OBJECT_ID(N'fence_api.Inspect');";
    let before = db.query(altered_at).await[0].get::<&str, usize>(0).map(str::to_string);

    let status = fencepost_cli(&["status"], &deployer).await;
    let said = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(1), "{said}");
    for named in [
        "INSERT on OBJECT::[fence].[DeployedProcedure]".to_string(),
        format!("GRANT INSERT ON OBJECT::[fence].[DeployedProcedure] TO [{user}];"),
        "INSERT on OBJECT::[fence].[Deployment]".to_string(),
    ] {
        assert!(said.contains(&named), "{named}: {said}");
    }
    let migrate = fencepost_cli(&["migrate"], &deployer).await;
    assert_eq!(
        migrate.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    let after = db.query(altered_at).await[0].get::<&str, usize>(0).map(str::to_string);
    assert_eq!(before, after, "the refused deploy altered fence_api.Inspect");
    db.drop().await;
}

/// `--grant` adds members after the deploy: a login that may not add them is
/// told before the deploy runs, not after it.
#[tokio::test]
async fn a_grant_the_login_may_not_make_is_named_before_the_deploy_runs() {
    let test = "a_grant_the_login_may_not_make_is_named_before_the_deploy_runs";
    let Some(mut db) = TestDatabase::new(test).await else {
        return;
    };
    let service = support::user_of(&db.login_in_role(None).await);
    let deployer = db.login_in_role(None).await;
    let grant = format!("fence_service={service}");
    let migrate = fencepost_cli(&["migrate", "--grant", &grant], &deployer).await;
    let refused = String::from_utf8_lossy(&migrate.stderr);
    assert_eq!(migrate.status.code(), Some(2), "{refused}");
    // The role does not exist yet: the deploy would create it, owned by dbo.
    assert!(
        refused.contains(&format!(
            "ALTER ANY ROLE on DATABASE::[{}] (adding {service} to fence_service (--grant))",
            db.name
        )),
        "{refused}"
    );
    assert_eq!(fence_schemas(&db).await, 0, "the refused deploy created a schema");
    db.drop().await;
}

/// Schema `fence` made by a DBA for another principal before the first
/// deploy: its owner could write the tables, and on SQL Server the
/// procedures (dbo's) would not reach them by ownership chaining. `status`
/// names it, and `migrate` refuses (50198) before any change.
#[tokio::test]
async fn a_fence_schema_another_principal_owns_is_named_by_status_and_refused_by_migrate() {
    let test = "a_fence_schema_another_principal_owns_is_named_by_status_and_refused_by_migrate";
    let Some(mut db) = TestDatabase::new(test).await else {
        return;
    };
    let other = support::user_of(&db.login_in_role(None).await);
    db.exec(&format!("CREATE SCHEMA fence AUTHORIZATION [{other}];")).await;
    let owner_of_fence = || async {
        let rows = db
            .query("SELECT CAST(USER_NAME(principal_id) AS nvarchar(256)) FROM sys.schemas WHERE name = N'fence';")
            .await;
        rows[0].get::<&str, usize>(0).unwrap_or_default().to_string()
    };
    let history = || async {
        db.query("SELECT CASE WHEN OBJECT_ID(N'fence.SchemaHistory', N'U') IS NULL THEN 0 ELSE 1 END;")
            .await[0]
            .get::<i32, usize>(0)
            .unwrap_or_default()
    };

    let status = fencepost_cli(&["status"], &db.ado()).await;
    let said = String::from_utf8_lossy(&status.stdout);
    assert_ne!(status.status.code(), Some(0), "{said}");
    assert!(
        said.contains("schema fence") && said.to_lowercase().contains(&other.to_lowercase()),
        "status does not name the schema's owner: {said}"
    );
    assert!(said.contains("ALTER AUTHORIZATION ON SCHEMA::fence TO dbo"), "{said}");

    let migrate = fencepost_cli(&["migrate"], &db.ado()).await;
    let refused = String::from_utf8_lossy(&migrate.stderr);
    assert_eq!(migrate.status.code(), Some(2), "{refused}");
    assert!(refused.contains("schema fence"), "{refused}");
    assert!(owner_of_fence().await.eq_ignore_ascii_case(&other));
    assert_eq!(history().await, 0, "the refused deploy created the history");

    // The statement the refusal names makes dbo the owner, and the deploy runs.
    // Babelfish has no ALTER AUTHORIZATION on a schema: the DBA drops it.
    let fix = match db.is_babelfish().await {
        true => "DROP SCHEMA fence;",
        false => "ALTER AUTHORIZATION ON SCHEMA::fence TO dbo;",
    };
    db.exec(fix).await;
    let migrate = fencepost_cli(&["migrate"], &db.ado()).await;
    assert_eq!(
        migrate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    assert!(owner_of_fence().await.eq_ignore_ascii_case("dbo"));

    // The bootstrap runs only when migrations are pending: on a deployed
    // database the plan itself refuses a fence schema another owns.
    if !db.is_babelfish().await {
        db.exec(&format!("ALTER AUTHORIZATION ON SCHEMA::fence TO [{other}];"))
            .await;
        let migrate = fencepost_cli(&["migrate"], &db.ado()).await;
        let refused = String::from_utf8_lossy(&migrate.stderr);
        assert_eq!(migrate.status.code(), Some(2), "{refused}");
        assert!(refused.contains("schema fence"), "{refused}");
    }
    db.drop().await;
}

/// Babelfish's owner change drops the login's user, and with it the user's
/// role memberships: the note names them, and its undo gives the login its
/// user and those memberships back.
#[tokio::test]
async fn babelfish_s_owner_change_names_the_roles_it_drops_and_its_undo_restores_them() {
    let test = "babelfish_s_owner_change_names_the_roles_it_drops_and_its_undo_restores_them";
    let Some(mut db) = TestDatabase::new(test).await else {
        return;
    };
    if !db.is_babelfish().await {
        support::skip(
            test,
            "the engine is not Babelfish (SQL Server grants the rights instead)",
        );
        db.drop().await;
        return;
    }
    db.exec("CREATE ROLE app_readers;").await;
    let deployer = db.login_in_role(Some("app_readers")).await;
    let user = support::user_of(&deployer);
    let status = fencepost_cli(&["status", "--format", "json"], &deployer).await;
    let document: serde_json::Value = serde_json::from_slice(&status.stdout).expect("a JSON document");
    let notes = document["rights"]["notes"].to_string();
    assert!(
        notes.contains("app_readers"),
        "the note does not name the role: {notes}"
    );
    let undo_start = notes.find("to undo: ").expect("an undo") + "to undo: ".len();
    let undo_end = notes[undo_start..].find(')').expect("the undo ends") + undo_start;
    let undo = notes[undo_start..undo_end].replace("\\\"", "\"");
    assert!(undo.contains("ADD MEMBER"), "{undo}");

    let grant = document["rights"]["missing"][0]["grant"].as_str().unwrap().to_string();
    db.exec(&grant).await;
    let member = || async {
        db.query(&format!(
            "SELECT COUNT(*) FROM sys.database_role_members AS m
               JOIN sys.database_principals AS r ON r.principal_id = m.role_principal_id
               JOIN sys.database_principals AS u ON u.principal_id = m.member_principal_id
              WHERE r.name = N'app_readers' AND u.name = N'{user}';"
        ))
        .await[0]
            .get::<i32, usize>(0)
            .unwrap_or_default()
    };
    assert_eq!(member().await, 0, "the owner change kept the membership");
    db.exec(&undo).await;
    assert_eq!(member().await, 1, "the undo did not restore the membership: {undo}");
    db.drop().await;
}
