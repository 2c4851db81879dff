//! Live-test support: a fresh database per test on the engine named by
//! `FENCEPOST_TEST_MSSQL`, deployed with the real runner.
//!
//! Without the variable, [`TestDatabase::new`] prints
//! "skipped: FENCEPOST_TEST_MSSQL not set" and returns `None`, and the test
//! returns early: a skip that says so, never a silent pass.
//!
//! A [`TestDatabase`] is dropped from the server whatever happens to the test:
//! by [`TestDatabase::drop`] at the end, or, when a failed assertion unwinds
//! past that call, by its `Drop`.

pub mod artifact_upload;
pub mod babelfish_postgres;
pub mod binary;
pub mod caller;
pub mod case_insensitive_store;
pub mod deploy;
#[cfg(feature = "fake")]
pub mod differential;
pub mod fixtures;
pub mod gated_store;
pub mod get_only_store;
pub mod lease;
pub mod overwriting_store;
pub mod prepared;
pub mod proxy;
pub mod quirky_store;
pub mod read_only_store;
pub mod refusal;
pub mod report_table;
mod shared;
pub mod signal;
pub mod stress_ledger;

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};

use fencepost::deploy::{DeployError, MigrateOptions, MigrateReport, Sources};
use fencepost::{Connection, ConnectionString};

/// The variable holding an ADO connection string for a login that may
/// create databases and logins.
pub const ENV: &str = "FENCEPOST_TEST_MSSQL";

/// Returns the server connection string, or prints the skip line for `test`.
pub fn server_or_skip(test: &str) -> Option<String> {
    match std::env::var(ENV) {
        Ok(ado) if !ado.trim().is_empty() => Some(ado),
        _ => {
            // CI names an engine and says so: there, a live test that finds
            // none has lost it on the way, which is a failure, not a skip.
            if std::env::var("FENCEPOST_REQUIRE_LIVE").as_deref() == Ok("1") {
                panic!("{test}: FENCEPOST_REQUIRE_LIVE=1 but {ENV} is not set in this test's environment");
            }
            // Straight to the stream rather than eprintln!, which the test
            // harness captures: a skip must be seen, not only a pass.
            let _ = writeln!(std::io::stderr(), "{test}: skipped: {ENV} not set");
            None
        }
    }
}

/// Prints the line that marks `test` as skipped, and why, past the test
/// harness's capture: a skip must be seen, not counted as a pass.
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "{test}: skipped: {reason}");
}

/// A database made for one test and dropped by [`TestDatabase::drop`], or by
/// `Drop` when the test panicked before it got there.
pub struct TestDatabase {
    /// The database name.
    pub name: String,
    server_ado: String,
    logins: Vec<String>,
    /// Shared with the other tests of this run and binary ([`TestDatabase::shared`]):
    /// the test's teardown drops its logins, and the database outlives it.
    shared: bool,
    /// Set once the database and logins are gone, so `Drop` has nothing to do.
    dropped: bool,
    /// The session [`TestDatabase::query`] and [`TestDatabase::exec`] run
    /// on, opened at the first of them. A session is dear on Babelfish: a
    /// sign-in, then each function a statement names is looked up afresh
    /// (a tenth of a second or more each on a busy engine), so a test's
    /// many setup statements share one.
    session: tokio::sync::Mutex<Option<Connection>>,
    /// The same for the server's catalog (logins), opened at the first login.
    server_session: Option<Connection>,
}

/// The prefix of every test database's name; a login's is [`LOGIN_PREFIX`].
/// Both are followed by [`unique_suffix`].
const DATABASE_PREFIX: &str = "fp_";
const LOGIN_PREFIX: &str = "fp_login_";

/// `<pid>_<six hex digits, or x>_<counter>`: the process that made the name,
/// and what makes it unique within that process.
fn unique_suffix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{}_{}_{n}",
        std::process::id(),
        uuid::Uuid::new_v4().simple().to_string().get(..6).unwrap_or("x")
    )
}

impl TestDatabase {
    /// Creates an empty database, or returns `None` (after printing the skip
    /// line) when no engine is configured.
    pub async fn new(test: &str) -> Option<Self> {
        let server_ado = server_or_skip(test)?;
        sweep_leftovers_once(&server_ado);
        Some(Self::create(server_ado).await)
    }

    /// Creates an empty database on the server of `server_ado`.
    async fn create(server_ado: String) -> Self {
        let name = format!("fp_{}", unique_suffix());
        let mut admin = connect_ado(&server_ado).await;
        if let Err(e) = with_catalog_retry(&mut admin, &format!("CREATE DATABASE [{name}];")).await {
            panic!("creating the test database: {e}");
        }
        Self {
            name,
            server_ado,
            logins: Vec::new(),
            shared: false,
            dropped: false,
            session: Default::default(),
            server_session: Some(admin),
        }
    }

    /// A database of the test's own with the shipped T-SQL deployed by the
    /// real runner: one made ahead of the test when `make test` keeps a pool
    /// ([`prepared`]), otherwise one created and deployed now.
    pub async fn deployed(test: &str) -> Option<Self> {
        let server_ado = server_or_skip(test)?;
        sweep_leftovers_once(&server_ado);
        if let Some(db) = Self::prepared(&server_ado) {
            return Some(db);
        }
        let db = Self::create(server_ado).await;
        {
            // On the test's own session, which its later statements then
            // find warm: the deploy leaves only the options every deploy
            // sets (ANSI defaults, XACT_ABORT ON) and no lock or transaction.
            fencepost::deploy::migrate(
                &mut *db.session().await,
                &Sources::embedded().expect("embedded sources"),
                &MigrateOptions::default(),
                &mut |_| {},
            )
            .await
            .expect("first deploy");
        }
        Some(db)
    }

    /// The ADO connection string for this database, as the deploy login.
    pub fn ado(&self) -> String {
        format!("{};Database={}", self.server_ado.trim_end_matches(';'), self.name)
    }

    /// The parsed connection string for this database.
    pub fn connection_string(&self) -> ConnectionString {
        ConnectionString::parse(&self.ado()).expect("test connection string")
    }

    /// Whether the engine is Babelfish, on the evidence `fencepost check`
    /// uses (`SERVERPROPERTY('Babelfish')` is NULL on SQL Server). Tests skip
    /// over a known gap of Babelfish only when this says so.
    pub async fn is_babelfish(&self) -> bool {
        let rows = self
            .query("SELECT CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 0 ELSE 1 END AS int);")
            .await;
        rows[0].get::<i32, usize>(0) == Some(1)
    }

    /// A new connection to this database.
    pub async fn connect(&self) -> Connection {
        connect_ado(&self.ado()).await
    }

    /// Runs one batch in this database, on the test's own session, and
    /// returns its first result set's rows.
    pub async fn query(&self, sql: &str) -> Vec<tiberius::Row> {
        let mut session = self.session().await;
        let rows = match session.simple_query(sql).await {
            Ok(stream) => stream.into_first_result().await,
            Err(e) => Err(e),
        };
        rows.unwrap_or_else(|e| {
            // A session that failed is not reused: it may be gone (a test
            // ended it) or still in the middle of a reply.
            *session.0 = None;
            panic!("{sql}: {e}")
        })
    }

    /// The test's own session ([`TestDatabase::query`]), opened if it is
    /// not, for a read through the library (`deploy::status`, the identity)
    /// that needs a connection. It is held until the guard is dropped, so
    /// `query` and `exec` wait for it meanwhile. A batch that leaves the
    /// session changed (a USE, a SET, an open transaction) or that must run
    /// beside another belongs on a connection of its own
    /// ([`TestDatabase::connect`]), and so does the audit's catalog read:
    /// after it, Babelfish 4.2 refuses a GRANT on the same session with
    /// `cannot fetch toast data without an active snapshot`.
    pub async fn session(&self) -> TestSession<'_> {
        let mut session = self.session.lock().await;
        if session.is_none() {
            *session = Some(self.connect().await);
        }
        TestSession(session)
    }

    /// The error `sql` is refused with, on the test's own session
    /// ([`TestDatabase::query`]); a panic if it runs. The session is kept:
    /// a refused batch must leave no transaction open, as a procedure's
    /// refusal of bad input does. A new session per refusal would cost a
    /// login and the first-call compiles again on Babelfish.
    pub async fn refusal(&self, sql: &str) -> tiberius::error::Error {
        let mut session = self.session().await;
        let answer = match session.simple_query(sql).await {
            Ok(stream) => stream.into_results().await.map(drop),
            Err(error) => Err(error),
        };
        answer.expect_err(sql)
    }

    /// Runs one batch in this database, on the test's own session
    /// ([`TestDatabase::query`]), panicking on error.
    pub async fn exec(&self, sql: &str) {
        self.query(sql).await;
    }

    /// Deploys `sources` with the runner, as `fencepost migrate` does.
    pub async fn migrate(&self, sources: &Sources) -> Result<MigrateReport, DeployError> {
        let mut conn = self.connect().await;
        fencepost::deploy::migrate(&mut conn, sources, &MigrateOptions::default(), &mut |_| {}).await
    }

    /// Creates a login and a user for it in this database, member of `role`
    /// (if any), and returns an ADO string that logs in as it.
    pub async fn login_in_role(&mut self, role: Option<&str>) -> String {
        let login = format!("fp_login_{}", unique_suffix());
        let password = format!("Pw#{}", uuid::Uuid::new_v4().simple());
        if self.server_session.is_none() {
            self.server_session = Some(connect_ado(&self.server_ado).await);
        }
        let admin = self.server_session.as_mut().expect("the server session is open");
        let create = format!("CREATE LOGIN [{login}] WITH PASSWORD = '{password}';");
        if let Err(e) = with_catalog_retry(admin, &create).await {
            panic!("{create}: {e}");
        }
        self.user_for_login(login, password, role).await
    }

    async fn user_for_login(&mut self, login: String, password: String, role: Option<&str>) -> String {
        self.logins.push(login.clone());
        let mut add = format!("CREATE USER [{login}] FOR LOGIN [{login}];");
        if let Some(role) = role {
            add += &format!("\nALTER ROLE [{role}] ADD MEMBER [{login}];");
        }
        self.exec(&add).await;
        let server = ConnectionString::parse(&self.server_ado)
            .expect("server string")
            .server();
        let (host, port) = server.rsplit_once(':').expect("host:port");
        let encrypt = ado_value(&self.server_ado, "encrypt").unwrap_or_else(|| "true".into());
        let trust = ado_value(&self.server_ado, "trustservercertificate").unwrap_or_else(|| "false".into());
        format!(
            "Server=tcp:{host},{port};Database={};User ID={login};Password={password};Encrypt={encrypt};TrustServerCertificate={trust}",
            self.name
        )
    }

    /// Drops the database and the logins made for it. Connections the test
    /// still holds make the drop wait and retry, then give up with a warning:
    /// cleanup never fails a test.
    pub async fn drop(mut self) {
        // Its own session would keep the database in use.
        self.session.get_mut().take();
        if self.shared && self.logins.is_empty() {
            // Nothing of the test's own to drop: no session needed.
            self.dropped = true;
            return;
        }
        let admin = match self.server_session.take() {
            Some(admin) => admin,
            None => connect_ado(&self.server_ado).await,
        };
        teardown(admin, &self.server_ado, &self.name, &self.logins, self.shared).await;
        self.dropped = true;
    }
}

impl Drop for TestDatabase {
    /// The teardown of a test that never reached [`TestDatabase::drop`]: it
    /// panicked, or returned early. Locals declared after the database (the
    /// test's clients and connections) are dropped before it, so their
    /// sessions are closed by now.
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // Its own sessions would keep the database in use.
        self.session.get_mut().take();
        self.server_session.take();
        if self.shared && self.logins.is_empty() {
            return;
        }
        let (server_ado, name, logins, shared) = (
            self.server_ado.clone(),
            self.name.clone(),
            self.logins.clone(),
            self.shared,
        );
        // This may run on the test's own runtime thread, which cannot block
        // on a future: the teardown gets a thread and a runtime of its own,
        // and the test waits for it so the process cannot exit first.
        let cleanup = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the teardown")
                .block_on(async {
                    teardown(connect_ado(&server_ado).await, &server_ado, &name, &logins, shared).await
                });
        });
        if cleanup.join().is_err() {
            // The thread's panic message has been printed; panicking again
            // here, perhaps while unwinding, would abort the test process.
            let _ = writeln!(std::io::stderr(), "warning: database {} left behind", self.name);
        }
    }
}

/// A test database's own session ([`TestDatabase::session`]), borrowed.
pub struct TestSession<'a>(tokio::sync::MutexGuard<'a, Option<Connection>>);

impl std::ops::Deref for TestSession<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.0.as_ref().expect("the test's session is open")
    }
}

impl std::ops::DerefMut for TestSession<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.0.as_mut().expect("the test's session is open")
    }
}

/// The id of the test process that made `name`, when `name` is a test
/// database's (`fp_<pid>_<hex>_<n>`) or a test login's (`fp_login_<pid>_<hex>_<n>`,
/// with `login` true), or the id of the test runner whose run shares the
/// database (`fp_<pid>_shared_<binary>`, [`TestDatabase::shared`]), and
/// nothing else.
pub fn maker_of(name: &str, login: bool) -> Option<u32> {
    let rest = if login {
        name.strip_prefix(LOGIN_PREFIX)?
    } else {
        name.strip_prefix(DATABASE_PREFIX)?
    };
    if !login
        && let Some((pid, binary)) = rest.split_once("_shared_")
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && !binary.is_empty()
        && binary
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return pid.parse().ok();
    }
    let mut parts = rest.split('_');
    let (pid, unique, counter) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let unique_ok = unique == "x" || (unique.len() == 6 && unique.bytes().all(|b| b.is_ascii_hexdigit()));
    (parts.next().is_none() && digits(pid) && unique_ok && digits(counter))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether the test process that made a name is gone: not this process, and
/// no process of that id is running. A live process's databases are its own
/// business, whoever it is.
fn maker_is_gone(pid: u32) -> bool {
    pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Once per test run, before its first database: drops the test databases
/// and logins that a test process which is no longer running left behind
/// (killed by a time-out, Ctrl-C or the OOM killer before its teardown ran),
/// ending their sessions first as a teardown does.
pub fn sweep_leftovers_once(server_ado: &str) {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        // The runner starts a process per test (nextest) or per binary
        // (cargo test); the first of its run sweeps for all of them.
        let run = shared::run_id();
        let marker = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fp_swept_{run}"));
        if std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&marker)
            .is_err()
        {
            return;
        }
        let server_ado = server_ado.to_owned();
        // The caller may be on a test's runtime thread, which cannot block
        // on a future: the sweep gets a thread and a runtime of its own.
        let sweep = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the sweep")
                .block_on(sweep_leftovers(&server_ado));
        });
        if sweep.join().is_err() {
            let _ = writeln!(
                std::io::stderr(),
                "warning: the sweep of earlier runs' leftovers failed"
            );
        }
    });
}

/// Drops the test databases and logins whose making process is gone (see
/// [`sweep_leftovers_once`]).
pub async fn sweep_leftovers(server_ado: &str) {
    let mut admin = connect_ado(server_ado).await;
    let (databases, logins) = leftovers(&mut admin).await;
    for login in &logins {
        end_sessions(&mut admin, &format!("login_name = N'{login}'")).await;
        // IF EXISTS: another process starting its tests sweeps the same
        // leftovers at the same time.
        let drop_login =
            format!("IF EXISTS (SELECT 1 FROM sys.server_principals WHERE name = N'{login}') DROP LOGIN [{login}];");
        match with_catalog_retry(&mut admin, &drop_login).await {
            Ok(()) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "dropped login {login}, left behind by an earlier run"
                );
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "warning: login {login} left behind: {e}");
            }
        }
    }
    for name in databases {
        end_database_sessions(&mut admin, &name).await;
        match with_catalog_retry(&mut admin, &format!("DROP DATABASE IF EXISTS [{name}];")).await {
            Ok(()) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "dropped database {name}, left behind by an earlier run"
                );
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "warning: database {name} left behind: {e}");
            }
        }
    }
}

/// The test databases and logins whose making process (or, for a shared
/// database, whose test run) is gone.
pub async fn leftovers(admin: &mut Connection) -> (Vec<String>, Vec<String>) {
    let logins = names_of(
        admin,
        "SELECT name FROM sys.server_principals WHERE name LIKE N'fp[_]login[_]%';",
    )
    .await;
    let databases = names_of(admin, "SELECT name FROM sys.databases WHERE name LIKE N'fp[_]%';").await;
    let gone = |login: bool| move |name: &String| maker_of(name, login).is_some_and(maker_is_gone);
    (
        databases.into_iter().filter(gone(false)).collect(),
        logins.into_iter().filter(gone(true)).collect(),
    )
}

/// The scratch databases `fencepost selftest --scratch-database` makes
/// (`fencepost_selftest_<run id>`). A run drops its own at its end, so one
/// still there once the suite has finished was left behind.
pub async fn selftest_scratch_databases(admin: &mut Connection) -> Vec<String> {
    names_of(
        admin,
        "SELECT name FROM sys.databases WHERE name LIKE N'fencepost[_]selftest[_]%';",
    )
    .await
}

/// Drops database `name`, ending its sessions first as a teardown does;
/// says on stderr when it cannot.
pub async fn drop_database(admin: &mut Connection, name: &str) {
    end_database_sessions(admin, name).await;
    if let Err(e) = with_catalog_retry(admin, &format!("DROP DATABASE IF EXISTS [{name}];")).await {
        let _ = writeln!(std::io::stderr(), "warning: database {name} left behind: {e}");
    }
}

/// The first column of `sql`'s rows, or nothing when the query fails (a
/// sweep never fails a test).
async fn names_of(admin: &mut Connection, sql: &str) -> Vec<String> {
    let rows = match admin.simple_query(sql).await {
        Ok(stream) => stream.into_first_result().await.unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    rows.iter()
        .filter_map(|row| row.get::<&str, usize>(0).map(str::to_owned))
        .collect()
}

/// Drops `logins` and the database `name`; of a shared database, only the
/// logins and their users, since other tests are still using it.
async fn teardown(mut admin: Connection, server_ado: &str, name: &str, logins: &[String], shared: bool) {
    if shared {
        shared::drop_users(&mut admin, server_ado, name, logins).await;
    }
    // The test is over, but a connection it still held, or the pool of a
    // client a failed test never closed, would keep a login logged in and
    // the database in use, and both would be left behind: end them first.
    // The database's sessions first: a login's session still signing in
    // shows under no login name yet, but already holds the database.
    if !shared {
        end_database_sessions(&mut admin, name).await;
    }
    for login in logins {
        end_sessions(&mut admin, &format!("login_name = N'{login}'")).await;
        if let Err(e) = with_catalog_retry(&mut admin, &format!("DROP LOGIN [{login}];")).await {
            let _ = writeln!(std::io::stderr(), "warning: login {login} left behind: {e}");
        }
    }
    if shared {
        return;
    }
    end_database_sessions(&mut admin, name).await;
    if let Err(e) = with_catalog_retry(&mut admin, &format!("DROP DATABASE [{name}];")).await {
        let _ = writeln!(std::io::stderr(), "warning: database {name} left behind: {e}");
    }
}

/// KILLs every other session that is in database `name`, as
/// [`end_sessions`] does. On Babelfish a session also holds a database while
/// it holds that logical database's session lock (an advisory lock keyed by
/// the database id plus 0xABCDEF, with 3 as its fourth field), which is what
/// its DROP DATABASE tests ("in use in another session"); such a session is
/// ended too, and said on stderr when `sys.dm_exec_sessions` places it in
/// another database.
pub(super) async fn end_database_sessions(admin: &mut Connection, name: &str) {
    let holders = format!(
        "IF SERVERPROPERTY('Babelfish') IS NOT NULL EXEC (N'SELECT CAST(l.pid AS int) FROM pg_catalog.pg_locks AS l \
         WHERE l.locktype = ''advisory'' AND l.classid = 0 AND l.objsubid = 3 AND CAST(l.granted AS int) = 1 \
         AND CAST(l.objid AS bigint) = CAST(DB_ID(N''{name}'') AS bigint) + 11259375 AND l.pid <> @@SPID');"
    );
    end_sessions_and(admin, &format!("database_id = DB_ID(N'{name}')"), &holders).await;
}

/// KILLs every other session that matches `filter` (a condition on
/// `sys.dm_exec_sessions`) and waits, up to ten seconds, until none is left:
/// a KILLed session ends on its own time, and the DROP that follows fails
/// while it is still there. Both engines support KILL. What goes wrong is
/// said on stderr (the drop that follows then retries, and warns if it
/// cannot), so a database left behind says why.
async fn end_sessions(admin: &mut Connection, filter: &str) {
    end_sessions_and(admin, filter, "").await;
}

/// [`end_sessions`], also ending the sessions that the batch `more` lists.
async fn end_sessions_and(admin: &mut Connection, filter: &str, more: &str) {
    let sql = format!(
        "SELECT CAST(session_id AS int) FROM sys.dm_exec_sessions WHERE {filter} AND session_id <> @@SPID; {more}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut killed = std::collections::HashSet::new();
    let mut said = std::collections::HashSet::new();
    loop {
        let listed = match admin.simple_query(&sql).await {
            Ok(stream) => stream.into_results().await,
            Err(e) => Err(e),
        };
        let ids =
            |rows: &[tiberius::Row]| -> Vec<i32> { rows.iter().filter_map(|row| row.get::<i32, usize>(0)).collect() };
        let sessions: Vec<i32> = match listed {
            Ok(results) => {
                let mut lists = results.iter().map(|rows| ids(rows));
                let mut sessions = lists.next().unwrap_or_default();
                for extra in lists.flatten() {
                    if sessions.contains(&extra) {
                        continue;
                    }
                    if said.insert(extra) {
                        let _ = writeln!(
                            std::io::stderr(),
                            "warning: session {extra} holds what is to be dropped, though not where {filter}"
                        );
                    }
                    sessions.push(extra);
                }
                sessions
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "warning: listing the sessions where {filter}: {e}");
                return;
            }
        };
        if sessions.is_empty() {
            return;
        }
        if std::time::Instant::now() > deadline {
            let _ = writeln!(
                std::io::stderr(),
                "warning: sessions {sessions:?} ({filter}) outlived their KILL"
            );
            return;
        }
        // A session KILLed once is left to end; one whose KILL failed is tried again.
        let unkilled: Vec<i32> = sessions.into_iter().filter(|id| !killed.contains(id)).collect();
        for id in unkilled {
            let answer = match admin.simple_query(format!("KILL {id};")).await {
                Ok(stream) => stream.into_results().await.map(drop),
                Err(e) => Err(e),
            };
            match answer {
                Ok(()) => _ = killed.insert(id),
                // Babelfish refuses to KILL a backend that has not finished
                // its TDS login, though it may already hold the database's
                // session lock: it is ended from the PostgreSQL side.
                Err(e) if e.to_string().contains("not an active process ID for a TDS connection") => {
                    if terminate_backend(admin, id).await {
                        _ = killed.insert(id);
                    } else {
                        _ = writeln!(
                            std::io::stderr(),
                            "warning: KILL {id} ({filter}): {e}, and ending its backend failed"
                        );
                    }
                }
                Err(e) => _ = writeln!(std::io::stderr(), "warning: KILL {id} ({filter}): {e}"),
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Ends Babelfish backend `pid` with PostgreSQL's `pg_terminate_backend`:
/// whether it was signalled. The T-SQL login may not signal a backend whose
/// login has not finished; the PostgreSQL superuser of
/// `FENCEPOST_TEST_POSTGRES`, when set, may.
async fn terminate_backend(admin: &mut Connection, pid: i32) -> bool {
    let sql = format!("SELECT CAST(pg_catalog.pg_terminate_backend({pid}) AS int);");
    let answered = match admin.simple_query(sql).await {
        Ok(stream) => stream.into_row().await,
        Err(e) => Err(e),
    };
    if matches!(answered, Ok(Some(row)) if row.get::<i32, usize>(0) == Some(1)) {
        return true;
    }
    let Some(url) = std::env::var(babelfish_postgres::POSTGRES_ENV)
        .ok()
        .filter(|url| !url.is_empty())
    else {
        return false;
    };
    let ended = tokio::task::spawn_blocking(move || {
        std::process::Command::new("psql")
            .args([
                url.as_str(),
                "-X",
                "-q",
                "-At",
                "-c",
                &format!("SELECT pg_terminate_backend({pid});"),
            ])
            .output()
    })
    .await;
    matches!(ended, Ok(Ok(output)) if String::from_utf8_lossy(&output.stdout).trim() == "t")
}

/// The user (and login) name in an ADO string made by
/// [`TestDatabase::login_in_role`].
pub fn user_of(ado: &str) -> String {
    ado_value(ado, "userid").expect("the support module names the user")
}

/// The value of `key` (lower case, spaces removed) in an ADO string.
pub fn ado_value(ado: &str, key: &str) -> Option<String> {
    ado.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim().to_ascii_lowercase().replace(' ', "") == key).then(|| v.trim().to_string())
    })
}

/// Runs a CREATE or DROP DATABASE or a CREATE or DROP LOGIN, retrying
/// while another session is in the way (see [`is_transient_catalog_conflict`]).
pub async fn with_catalog_retry(admin: &mut Connection, sql: &str) -> Result<(), tiberius::error::Error> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = match admin.simple_query(sql).await {
            Ok(stream) => stream.into_results().await.map(drop),
            Err(e) => Err(e),
        };
        match result {
            Err(tiberius::error::Error::Server(token))
                if attempt < 20 && is_transient_catalog_conflict(token.code(), token.message()) =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
            }
            other => return other,
        }
    }
}

/// SQL Server's "Cannot drop database \"%.*ls\" because it is currently in use."
const SQL_SERVER_DATABASE_IN_USE: u32 = 3702;
/// SQL Server's "Could not drop login '%.*ls' as the user is currently logged in."
const SQL_SERVER_LOGIN_LOGGED_IN: u32 = 15434;
/// The one number Babelfish gives every PostgreSQL error; its message tells them apart.
const BABELFISH: u32 = 33557097;

/// Whether the server refused a catalog change only because another session
/// was in the way, so that the same statement may succeed in a moment. These
/// are the engines' exact refusals, and each names only a test's own
/// database or login:
///
/// * a database or login still in use by a session that is closing (SQL
///   Server 3702 and 15434; on Babelfish `Cannot drop database "fp_..."
///   because it is currently in use in another session` and `Could not drop
///   login 'fp_login_...' as the user is currently logged in.`);
/// * Babelfish refusing concurrent catalog changes where SQL Server queues
///   them: `tuple concurrently updated` (CREATE and DROP DATABASE) and `tuple
///   concurrently deleted` (DROP DATABASE, DROP LOGIN);
/// * Babelfish adding each new login to every database's guest role, which
///   fails with `role "fp_..._guest" does not exist` while a parallel test
///   drops its database, and touching every login's role when it creates a
///   database, which fails with `role "fp_login_..." does not exist` while a
///   parallel test drops its login.
pub fn is_transient_catalog_conflict(code: u32, message: &str) -> bool {
    if code == SQL_SERVER_DATABASE_IN_USE || code == SQL_SERVER_LOGIN_LOGGED_IN {
        return true;
    }
    if code != BABELFISH {
        return false;
    }
    let between = |prefix: &str, suffix: &str| message.strip_prefix(prefix)?.strip_suffix(suffix);
    let database = |name: &str| maker_of(name, false).is_some();
    let login = |name: &str| maker_of(name, true).is_some();
    message == "tuple concurrently updated"
        || message == "tuple concurrently deleted"
        || between(
            "Cannot drop database \"",
            "\" because it is currently in use in another session",
        )
        .is_some_and(database)
        || between("Could not drop login '", "' as the user is currently logged in.").is_some_and(login)
        || between("role \"", "\" does not exist")
            .is_some_and(|role| login(role) || role.strip_suffix("_guest").is_some_and(database))
}

/// Opens a connection from an ADO string, panicking with the reason.
pub async fn connect_ado(ado: &str) -> Connection {
    let target = ConnectionString::parse(ado).expect("valid test connection string");
    target
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connecting for a test: {e}"))
}

/// Runs a batch to the end, panicking on error.
pub async fn exec(conn: &mut Connection, sql: &str) {
    conn.simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_results()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Whether the login of `ado` may EXECUTE `procedure`, as the server answers
/// HAS_PERMS_BY_NAME for it; `None` when the engine cannot say.
pub async fn has_execute(ado: &str, procedure: &str) -> Option<bool> {
    let mut conn = connect_ado(ado).await;
    let sql = format!("SELECT HAS_PERMS_BY_NAME(N'{procedure}', N'OBJECT', N'EXECUTE');");
    let row = conn.simple_query(sql).await.ok()?.into_row().await.ok()??;
    row.get::<i32, usize>(0).map(|v| v == 1)
}

/// `ado` with the value of `key` replaced (keys compared without case or spaces).
pub fn replace_ado_value(ado: &str, key: &str, value: &str) -> String {
    let kept: Vec<&str> = ado
        .split(';')
        .filter(|pair| {
            pair.split_once('=')
                .is_none_or(|(k, _)| k.trim().to_ascii_lowercase().replace(' ', "") != key)
        })
        .collect();
    format!("{};{key}={value}", kept.join(";").trim_end_matches(';'))
}

/// Takes the deploy lock of the connection's database, as another deployment
/// would (the resource name is the runner's: `fencepost:deploy:` + database).
pub async fn hold_deploy_lock(conn: &mut Connection) {
    exec(
        conn,
        "DECLARE @s int, @r nvarchar(255) = N'fencepost:deploy:' + DB_NAME();
         EXEC @s = sp_getapplock @Resource = @r, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0;
         IF @s < 0 THROW 50000, N'the deploy lock is taken', 1;",
    )
    .await;
}

/// Releases what [`hold_deploy_lock`] took.
pub async fn release_deploy_lock(conn: &mut Connection) {
    exec(
        conn,
        "DECLARE @r nvarchar(255) = N'fencepost:deploy:' + DB_NAME();
         EXEC sp_releaseapplock @Resource = @r, @LockOwner = N'Session';",
    )
    .await;
}
