//! A JDBC URL deploys with the real binary, as an ADO.NET string does.

mod support;

use fencepost::ConnectionString;
use support::TestDatabase;
use tokio::process::Command;

/// The test database as a JDBC URL, the password in braces.
fn jdbc_url(db: &TestDatabase) -> String {
    let ado = db.ado();
    let parsed = ConnectionString::parse(&ado).expect("test connection string");
    let (host, port) = parsed
        .server()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let password = support::ado_value(&ado, "password")
        .or_else(|| support::ado_value(&ado, "pwd"))
        .unwrap_or_default();
    let encrypt = support::ado_value(&ado, "encrypt").unwrap_or_else(|| "true".into());
    let trust = support::ado_value(&ado, "trustservercertificate").unwrap_or_else(|| "false".into());
    format!(
        "jdbc:sqlserver://{host}:{port};databaseName={};user={};password={{{password}}};encrypt={encrypt};trustServerCertificate={trust}",
        db.name,
        parsed.user()
    )
}

async fn fencepost_cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fencepost"))
        .args(args)
        .env_remove("FENCEPOST_CONNECTION")
        .env_remove("FENCEPOST_ACCESS_TOKEN")
        .output()
        .await
        .expect("run fencepost")
}

#[tokio::test]
async fn a_jdbc_url_deploys_and_reads_status_like_an_ado_string() {
    let Some(db) = TestDatabase::new("a_jdbc_url_deploys_and_reads_status_like_an_ado_string").await else {
        return;
    };
    let url = jdbc_url(&db);
    let parsed = ConnectionString::parse(&url).expect("the JDBC URL parses");
    assert_eq!(parsed.database(), db.name);

    let migrate = fencepost_cli(&["migrate", "--connection", &url]).await;
    let stderr = String::from_utf8_lossy(&migrate.stderr).into_owned();
    assert!(migrate.status.success(), "migrate: {stderr}");

    // It deployed into the database the URL names.
    let rows = db
        .query("SELECT CAST(COUNT(*) AS int) FROM sys.procedures WHERE SCHEMA_NAME(schema_id) = 'fence_api';")
        .await;
    assert!(
        rows[0].get::<i32, usize>(0).unwrap_or(0) > 0,
        "no fence_api procedures in {}",
        db.name
    );

    // Exit 1 on Babelfish, whose procedures also need a PostgreSQL-side step
    // that status reports; what matters here is that the URL reached the same
    // deployment.
    let status = fencepost_cli(&["status", "--connection", &url]).await;
    let stdout = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        matches!(status.status.code(), Some(0 | 1)) && stdout.contains("everything is current"),
        "status after migrate: {stdout}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    db.drop().await;
}
