//! Deployed databases made ahead of the tests that need one of their own.
//!
//! On Babelfish a session compiles every T-SQL text afresh the first time it
//! meets it, so a first deploy costs seconds of engine CPU in a new session
//! and a fraction of that in one that has deployed before. `make test` starts
//! [`fill`] beside the test run, on one session that deploys database after
//! database with the real runner, and [`TestDatabase::deployed`] takes one
//! of them when it finds one ready. Otherwise, or without the pool (a test
//! run on its own, `cargo test`), the test deploys its own as before: the
//! database is the same either way, deployed by `fencepost::deploy::migrate`
//! with the embedded sources and the default options, and nobody else's.
//!
//! The pool is a directory, named by `FENCEPOST_TEST_POOL`. The filler
//! writes `<database>.ready` once the database is deployed and its session
//! has left it; a test takes a database by renaming that file to
//! `<database>.taken`, which one process wins. A taken database is the
//! test's: its teardown drops it like any other. The filler stops when
//! `stop` appears in the directory or the process that started it is gone,
//! and drops the databases nobody took. Its databases carry the filler's
//! pid in their name, so the sweep of leftovers takes them once it is gone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fencepost::Connection;
use fencepost::deploy::{MigrateOptions, Sources};

use super::{TestDatabase, connect_ado, server_or_skip, sweep_leftovers_once, unique_suffix, with_catalog_retry};

/// The variable naming the pool's directory.
pub const POOL: &str = "FENCEPOST_TEST_POOL";
/// The variable holding the pid of the process the filler serves: once it
/// is gone, so is the run.
pub const POOL_OWNER: &str = "FENCEPOST_TEST_POOL_OWNER";

/// How many deployed databases the filler keeps ready: enough for both test
/// slots of a two-core machine to find one, few enough that the ones left at
/// the end cost little to drop.
const READY: usize = 3;
/// The longest a filler runs, however it was left: a run takes well under.
const LIFETIME: Duration = Duration::from_secs(3 * 60 * 60);

impl TestDatabase {
    /// A deployed database of the pool, taken for `test` alone, or `None`
    /// when there is no pool or none is ready.
    pub(super) fn prepared(server_ado: &str) -> Option<Self> {
        let dir = PathBuf::from(std::env::var_os(POOL)?);
        let name = take_one(&dir)?;
        Some(Self {
            name,
            server_ado: server_ado.to_owned(),
            logins: Vec::new(),
            shared: false,
            dropped: false,
            session: Default::default(),
            server_session: None,
        })
    }
}

/// Renames the first `<name>.ready` in `dir` to `<name>.taken` and returns
/// `name`; another process may win a file first, and then the next is tried.
fn take_one(dir: &Path) -> Option<String> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let Some(name) = ready_name(&path) else { continue };
        if std::fs::rename(&path, dir.join(format!("{name}.taken"))).is_ok() {
            return Some(name);
        }
    }
    None
}

/// `name` of a `<name>.ready` file.
fn ready_name(path: &Path) -> Option<String> {
    (path.extension()? == "ready").then(|| path.file_stem()?.to_str().map(str::to_owned))?
}

fn ready_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().filter(|e| ready_name(&e.path()).is_some()).count())
        .unwrap_or(0)
}

/// Whether the filler should stop: `stop` is in the pool, the process it
/// serves is gone, or it has run for [`LIFETIME`].
fn should_stop(dir: &Path, owner: Option<u32>, started: Instant) -> bool {
    dir.join("stop").exists()
        || owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        || started.elapsed() > LIFETIME
}

/// Keeps [`READY`] deployed databases in the pool named by [`POOL`] until
/// told to stop, then drops the ones nobody took (see the module).
pub async fn fill() {
    let Some(server_ado) = server_or_skip("prepare_deployed_databases") else {
        return;
    };
    let dir = PathBuf::from(std::env::var_os(POOL).unwrap_or_else(|| panic!("{POOL} names no directory")));
    let owner = std::env::var(POOL_OWNER).ok().and_then(|pid| pid.parse().ok());
    sweep_leftovers_once(&server_ado);
    let started = Instant::now();
    let sources = Sources::embedded().expect("embedded sources");
    // One session for every deploy: after the first, it meets each text again.
    let mut session = connect_ado(&server_ado).await;
    let mut made = Vec::new();
    while !should_stop(&dir, owner, started) {
        if ready_count(&dir) >= READY {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let name = format!("fp_{}", unique_suffix());
        made.push(name.clone());
        deploy(&mut session, &name, &sources).await;
        std::fs::write(dir.join(format!("{name}.ready")), b"").expect("marking a database ready");
    }
    for name in made {
        // A database still ready was taken by nobody; one taken is the test's.
        if std::fs::rename(dir.join(format!("{name}.ready")), dir.join(format!("{name}.dropped"))).is_ok() {
            with_catalog_retry(&mut session, &format!("DROP DATABASE [{name}];"))
                .await
                .unwrap_or_else(|e| panic!("dropping the unused {name}: {e}"));
        }
    }
}

/// Creates `name` and deploys `sources` to it on `session`, which then
/// leaves it for `master`: a session in a database would hold up its drop.
async fn deploy(session: &mut Connection, name: &str, sources: &Sources) {
    with_catalog_retry(session, &format!("CREATE DATABASE [{name}];"))
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    with_catalog_retry(session, &format!("USE [{name}];"))
        .await
        .unwrap_or_else(|e| panic!("entering {name}: {e}"));
    fencepost::deploy::migrate(session, sources, &MigrateOptions::default(), &mut |_| {})
        .await
        .unwrap_or_else(|e| panic!("deploying {name}: {e}"));
    with_catalog_retry(session, "USE master;")
        .await
        .unwrap_or_else(|e| panic!("leaving {name}: {e}"));
}
