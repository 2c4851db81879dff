//! One deployed database shared by the tests of a run that touch only their
//! own keys: a deploy costs seconds on Babelfish, and these tests would each
//! pay it for an identical schema.
//!
//! A test may share only if nothing it does can be seen by another test of
//! the run: it uses keys and tables of its own (a fresh UUID in each name),
//! and never alters a procedure, changes a grant or a role, recovers,
//! redeploys, prunes or counts a whole table. Everything else keeps
//! [`TestDatabase::deployed`], a database of its own.
//!
//! The test runner may start every test in a process of its own (nextest) or
//! run all tests as threads of one (cargo test), so the database is found by
//! name and created under a file lock, by whichever test comes first. Its
//! name carries the runner's pid and the test binary's name,
//! `fp_<pid>_shared_it`: once the run is over that pid is gone, and the sweep
//! of leftovers drops it.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use fencepost::Connection;
use fencepost::deploy::Sources;

use super::{
    TestDatabase, connect_ado, end_database_sessions, end_sessions, server_or_skip, sweep_leftovers_once,
    with_catalog_retry,
};

impl TestDatabase {
    /// The deployed database shared by this run's tests (see the module's
    /// rules for who may share), or `None` after the skip line when no engine
    /// is configured. [`TestDatabase::drop`] drops only the logins the test
    /// made.
    pub async fn shared(test: &str) -> Option<Self> {
        let server_ado = server_or_skip(test)?;
        sweep_leftovers_once(&server_ado);
        let name = shared_name();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let lock = File::create(dir.join(format!("{name}.lock"))).expect("the shared database's lock file");
        let ready = dir.join(format!("{name}.deployed"));
        // Blocks this test's own runtime thread only, while another test
        // (another thread or process) deploys.
        lock.lock().expect("locking the shared database's lock file");
        let run = run_id();
        let mut db = Self {
            name: name.clone(),
            server_ado: server_ado.clone(),
            logins: Vec::new(),
            shared: true,
            dropped: false,
            session: Default::default(),
            server_session: None,
        };
        // Deployed by an earlier test of this run: a session is dear on
        // Babelfish, and this one would only look the database up.
        if std::fs::read_to_string(&ready).is_ok_and(|deployed_by| deployed_by == run) {
            lock.unlock().expect("unlocking the shared database's lock file");
            return Some(db);
        }
        let mut admin = connect_ado(&server_ado).await;
        let exists = admin
            .simple_query(format!(
                "SELECT CAST(CASE WHEN DB_ID(N'{name}') IS NULL THEN 0 ELSE 1 END AS int);"
            ))
            .await
            .expect("looking for the shared database")
            .into_row()
            .await
            .expect("looking for the shared database")
            .and_then(|row| row.get::<i32, usize>(0))
            == Some(1);
        if !(exists && ready.exists()) {
            // A deploy that did not finish (its test was killed) is no base
            // for anyone: start again.
            if exists {
                end_database_sessions(&mut admin, &name).await;
                with_catalog_retry(&mut admin, &format!("DROP DATABASE [{name}];"))
                    .await
                    .expect("dropping a half-deployed shared database");
            }
            let _ = std::fs::remove_file(&ready);
            with_catalog_retry(&mut admin, &format!("CREATE DATABASE [{name}];"))
                .await
                .expect("creating the shared database");
            db.migrate(&Sources::embedded().expect("embedded sources"))
                .await
                .expect("deploying the shared database");
            std::fs::write(&ready, &run).expect("marking the shared database deployed");
        }
        lock.unlock().expect("unlocking the shared database's lock file");
        db.server_session = Some(admin);
        Some(db)
    }
}

/// This run of the tests, as the marker of a deployed shared database
/// records it: nextest's id for the run, or the runner's pid under `cargo test`.
pub(super) fn run_id() -> String {
    std::env::var("NEXTEST_RUN_ID").unwrap_or_else(|_| std::os::unix::process::parent_id().to_string())
}

/// `fp_<runner pid>_shared_it` (`it` is the test binary): the same for every
/// test of this run, whether the runner starts a process per test or one for
/// them all.
fn shared_name() -> String {
    format!("fp_{}_shared_it", std::os::unix::process::parent_id())
}

/// Drops the users of `logins` from the shared database `name`, ending their
/// sessions first; the database and everyone else's sessions stay.
pub(super) async fn drop_users(admin: &mut Connection, server_ado: &str, name: &str, logins: &[String]) {
    if logins.is_empty() {
        return;
    }
    for login in logins {
        end_sessions(admin, &format!("login_name = N'{login}'")).await;
    }
    let ado = format!("{};Database={name}", server_ado.trim_end_matches(';'));
    let mut conn = connect_ado(&ado).await;
    for login in logins {
        let sql = format!("IF USER_ID(N'{login}') IS NOT NULL DROP USER [{login}];");
        let dropped = match conn.simple_query(sql).await {
            Ok(stream) => stream.into_results().await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = dropped {
            let _ = writeln!(std::io::stderr(), "warning: user {login} left behind in {name}: {e}");
        }
    }
}
