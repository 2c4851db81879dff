//! A JDBC URL deploys with the real binary, as an ADO.NET string does; and
//! which connection the binary uses when several are given.

use crate::support;

use fencepost::ConnectionString;
use support::TestDatabase;

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
    support::binary::tokio(support::binary::fencepost(args))
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
    // deployment: status through it says what status through the ADO.NET
    // string says, and exits as it does.
    let status = fencepost_cli(&["status", "--connection", &url]).await;
    let stdout = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        matches!(status.status.code(), Some(0 | 1)) && stdout.contains("everything is current"),
        "status after migrate: {stdout}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let by_ado = fencepost_cli(&["status", "--connection", &db.ado()]).await;
    assert_eq!(status.status.code(), by_ado.status.code());
    assert_eq!(stdout, String::from_utf8_lossy(&by_ado.stdout));
    db.drop().await;
}

/// A connection string that reaches nothing: port 1 refuses at once.
const UNREACHABLE: &str = "Server=tcp:127.0.0.1,1;User ID=u;Password=Unreachable#1;Connect Timeout=5";

/// `fencepost status`, run in `dir` with exactly the variables `env` and
/// `--connection` only when given: which database it read, told apart by
/// its exit status (1: the empty test database, pending; 2: unreachable).
async fn status_in(dir: &std::path::Path, connection: Option<&str>, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = match connection {
        Some(ado) => support::binary::fencepost_on(ado, ["status"]),
        None => support::binary::fencepost(["status"]),
    };
    command.current_dir(dir);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = support::binary::tokio(command)
        .output()
        .await
        .expect("run fencepost status");
    (
        output.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[tokio::test]
async fn status_exits_1_on_a_pending_database_and_connection_flag_beats_the_environments_variable_beats_fencepost_connection()
 {
    let test = "status_exits_1_on_a_pending_database_and_connection_flag_beats_the_environments_variable_beats_fencepost_connection";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let live = db.ado();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fencepost.toml"),
        "[environments.staging]\nconnection_env = \"FP_PRECEDENCE_STAGING\"\n\n\
         [environments.prod]\nconnection_env = \"FP_PRECEDENCE_PROD\"\n",
    )
    .unwrap();
    let reached = |(code, out): &(Option<i32>, String)| {
        // The empty database: reached, and merely pending.
        assert_eq!(*code, Some(1), "{out}");
        assert!(!out.contains("cannot reach"), "{out}");
    };
    let unreachable = |(code, out): &(Option<i32>, String)| {
        assert_eq!(*code, Some(2), "{out}");
        assert!(out.contains("cannot reach 127.0.0.1:1"), "{out}");
    };

    // A database with nothing deployed is pending: status exits 1.
    let pending = status_in(dir.path(), Some(&live), &[]).await;
    reached(&pending);
    assert!(pending.1.contains("V1__lease_tables"), "{}", pending.1);

    // --connection over the environment's variable and FENCEPOST_CONNECTION,
    // whichever of them points at the database.
    let everything_else_unreachable = [
        ("FENCEPOST_ENVIRONMENT", "staging"),
        ("FP_PRECEDENCE_STAGING", UNREACHABLE),
        ("FENCEPOST_CONNECTION", UNREACHABLE),
    ];
    reached(&status_in(dir.path(), Some(&live), &everything_else_unreachable).await);
    let everything_else_live = [
        ("FENCEPOST_ENVIRONMENT", "staging"),
        ("FP_PRECEDENCE_STAGING", live.as_str()),
        ("FENCEPOST_CONNECTION", live.as_str()),
    ];
    unreachable(&status_in(dir.path(), Some(UNREACHABLE), &everything_else_live).await);

    // The environment FENCEPOST_ENVIRONMENT names, and its variable over
    // FENCEPOST_CONNECTION.
    let staging_live = [
        ("FENCEPOST_ENVIRONMENT", "staging"),
        ("FP_PRECEDENCE_STAGING", live.as_str()),
        ("FP_PRECEDENCE_PROD", UNREACHABLE),
        ("FENCEPOST_CONNECTION", UNREACHABLE),
    ];
    reached(&status_in(dir.path(), None, &staging_live).await);
    let prod_unreachable = [
        ("FENCEPOST_ENVIRONMENT", "prod"),
        ("FP_PRECEDENCE_STAGING", live.as_str()),
        ("FP_PRECEDENCE_PROD", UNREACHABLE),
        ("FENCEPOST_CONNECTION", live.as_str()),
    ];
    unreachable(&status_in(dir.path(), None, &prod_unreachable).await);

    // --config names the file from anywhere, and --environment wins over
    // FENCEPOST_ENVIRONMENT.
    let elsewhere = tempfile::tempdir().unwrap();
    let config = dir.path().join("fencepost.toml");
    let config = config.to_str().unwrap();
    let by_config = [
        ("FENCEPOST_ENVIRONMENT", "prod"),
        ("FP_PRECEDENCE_STAGING", live.as_str()),
        ("FP_PRECEDENCE_PROD", UNREACHABLE),
    ];
    let mut command = support::binary::fencepost(["status", "--environment", "staging", "--config", config]);
    command.current_dir(elsewhere.path());
    for (name, value) in by_config {
        command.env(name, value);
    }
    let output = support::binary::tokio(command)
        .output()
        .await
        .expect("run fencepost status");
    reached(&(
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr),
    ));

    // FENCEPOST_CONNECTION when nothing else is given, both ways.
    reached(&status_in(dir.path(), None, &[("FENCEPOST_CONNECTION", live.as_str())]).await);
    unreachable(&status_in(dir.path(), None, &[("FENCEPOST_CONNECTION", UNREACHABLE)]).await);
    db.drop().await;
}

/// ADO.NET reads each group of synonyms as one key and the last written
/// wins: the server, database and login written last are the ones the
/// connection signs in to, whatever spelling came first.
#[tokio::test]
async fn the_last_spelling_of_server_database_and_user_is_the_one_signed_in_with() {
    let test = "the_last_spelling_of_server_database_and_user_is_the_one_signed_in_with";
    let Some(mut db) = TestDatabase::new(test).await else {
        return;
    };
    let login_ado = db.login_in_role(None).await;
    let login = support::user_of(&login_ado);
    let later = login_ado
        .replacen("Server=", "Data Source=", 1)
        .replacen("Database=", "Initial Catalog=", 1)
        .replacen("User ID=", "uid=", 1)
        .replacen("Password=", "pwd=", 1);
    let earlier = "Server=tcp:nowhere.invalid,1;Database=master;User ID=nobody;Password=wrong";
    let ado = format!("{earlier};{later}");
    let mut conn = support::connect_ado(&ado).await;
    let row = conn
        .simple_query("SELECT CAST(SUSER_SNAME() AS nvarchar(256)), CAST(DB_NAME() AS nvarchar(256));")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .expect("a row");
    assert!(row.get::<&str, usize>(0).unwrap().eq_ignore_ascii_case(&login), "{ado}");
    assert!(
        row.get::<&str, usize>(1).unwrap().eq_ignore_ascii_case(&db.name),
        "{ado}"
    );
    drop(conn);
    db.drop().await;
}
