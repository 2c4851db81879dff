//! `fencepost script --uninstall`: the script removes everything a deploy
//! created (tables, procedures, schemas, roles and their memberships, the
//! deploy journal and the migration history), and refuses, changing
//! nothing, while a lease is held. Each test has a database of its own.

use crate::support;

use fencepost::deploy::{FENCE_ROLES, UNINSTALL_REFUSED_HELD, render_uninstall_script};
use support::TestDatabase;
use support::caller::Caller;
use support::deploy::{run_carrying_on, shipped};
use uuid::Uuid;

/// What is left of a deploy: objects in its schemas, the schemas, the roles.
async fn leftovers(db: &TestDatabase) -> Vec<String> {
    let roles = FENCE_ROLES.map(|r| format!("N'{r}'")).join(", ");
    let rows = db
        .query(&format!(
            "SELECT s.name + N'.' + o.name FROM sys.objects AS o JOIN sys.schemas AS s ON s.schema_id = o.schema_id
              WHERE s.name IN (N'fence', N'fence_api', N'fence_admin')
             UNION ALL SELECT N'schema ' + name FROM sys.schemas WHERE name IN (N'fence', N'fence_api', N'fence_admin')
             UNION ALL SELECT N'role ' + name FROM sys.database_principals WHERE name IN ({roles});"
        ))
        .await;
    rows.iter()
        .map(|r| r.get::<&str, _>(0).unwrap_or_default().to_string())
        .collect()
}

async fn used_lease(db: &TestDatabase, key: &str, seconds: i32) {
    let mut caller = Caller::new(db.connect().await);
    let provision = caller
        .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key])
        .await;
    assert_eq!(provision.outcome(), "Created");
    assert_eq!(caller.acquire(key, Uuid::new_v4(), seconds).await.outcome(), "Acquired");
}

#[tokio::test]
async fn the_uninstall_script_leaves_nothing_a_deploy_created() {
    const TEST: &str = "the_uninstall_script_leaves_nothing_a_deploy_created";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    assert!(!leftovers(&db).await.is_empty(), "the deploy created nothing?");
    // A service user in a role, and a key whose lease was released.
    let _service = db.login_in_role(Some("fence_service")).await;
    let key = "uninstall:released";
    let mut caller = Caller::new(db.connect().await);
    assert_eq!(
        caller
            .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key])
            .await
            .outcome(),
        "Created"
    );
    let owner = Uuid::new_v4();
    let generation = caller.acquire(key, owner, 600).await.big("Generation").unwrap();
    let released = caller
        .call(
            "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3",
            &[&key, &owner, &generation],
        )
        .await;
    assert_eq!(released.outcome(), "Released");
    drop(caller);

    let errors = run_carrying_on(&db, &render_uninstall_script(&shipped())).await;
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(leftovers(&db).await, Vec::<String>::new());

    // The database takes a new deploy as if it had never had one.
    db.migrate(&shipped()).await.expect("a deploy after the uninstall");
    let redeployed = leftovers(&db).await;
    assert!(
        redeployed.iter().any(|o| o.eq_ignore_ascii_case("fence.Retirement")),
        "{redeployed:?}"
    );
    db.drop().await;
}

#[tokio::test]
async fn the_uninstall_script_refuses_while_a_lease_is_held_and_changes_nothing() {
    const TEST: &str = "the_uninstall_script_refuses_while_a_lease_is_held_and_changes_nothing";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    used_lease(&db, "uninstall:held", 600).await;
    let before = leftovers(&db).await;

    let errors = run_carrying_on(&db, &render_uninstall_script(&shipped())).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&UNINSTALL_REFUSED_HELD.to_string()) || e.contains("a lease is held")),
        "{errors:#?}"
    );
    assert_eq!(leftovers(&db).await, before);
    let held = db
        .query("SELECT COUNT(*) FROM fence.Resource WHERE Owner IS NOT NULL AND LeaseUntilUtc > SYSUTCDATETIME()")
        .await;
    assert_eq!(held[0].get::<i32, _>(0), Some(1));
    db.drop().await;
}

#[tokio::test]
async fn the_uninstall_script_drops_no_procedure_outside_the_fence_schemas_whatever_the_journal_names() {
    const TEST: &str = "the_uninstall_script_drops_no_procedure_outside_the_fence_schemas_whatever_the_journal_names";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    // An application's procedure, and a journal row naming it (whoever
    // wrote it): the uninstall is not the tool to drop it.
    db.exec("EXEC (N'CREATE PROCEDURE dbo.ApplicationOwn AS SELECT 1;');")
        .await;
    db.exec(
        "INSERT INTO fence.DeployedProcedure (ProcedureName, SourceChecksum, DeployedAtUtc) \
         VALUES (N'dbo.ApplicationOwn', REPLICATE('0', 64), SYSUTCDATETIME());",
    )
    .await;

    let errors = run_carrying_on(&db, &render_uninstall_script(&shipped())).await;
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(leftovers(&db).await, Vec::<String>::new());
    let kept = db
        .query("SELECT CAST(CASE WHEN OBJECT_ID(N'dbo.ApplicationOwn', N'P') IS NULL THEN 0 ELSE 1 END AS int);")
        .await;
    assert_eq!(
        kept[0].get::<i32, _>(0),
        Some(1),
        "the uninstall dropped dbo.ApplicationOwn"
    );
    db.drop().await;
}
