//! The deploy pool's filler (`support::pool`): not a test of the product but
//! the process that keeps deployed databases ready for the tests that need
//! one, started by those tests as this binary run on [`fill`] alone.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fencepost::Connection;
use fencepost::deploy::{MigrateOptions, Sources};

use crate::support::pool::{POOL_DIR_ENV, RUNNER_ENV};
use crate::support::{ENV, connect_ado, end_sessions, with_catalog_retry};

/// How many deployed databases the filler keeps ready.
const READY: usize = 2;

/// How long the filler waits for a test to take a database before it stops.
const IDLE: Duration = Duration::from_secs(90);

/// The filler: keeps [`READY`] deployed databases for the run named by the
/// environment, and drops those left when it stops. Without that
/// environment (a run that includes ignored tests) it does nothing.
#[tokio::test]
#[ignore = "the deploy pool's filler: started by the tests themselves"]
async fn fill() {
    let (Ok(dir), Ok(runner)) = (std::env::var(POOL_DIR_ENV), std::env::var(RUNNER_ENV)) else {
        return;
    };
    let (dir, runner) = (PathBuf::from(dir), runner.parse::<u32>().expect("the runner's pid"));
    let Ok(server_ado) = std::env::var(ENV) else {
        return;
    };
    let lock = File::create(dir.join("filler.lock")).expect("the filler's lock file");
    if lock.try_lock().is_err() {
        return;
    }
    let mut admin = connect_ado(&server_ado).await;
    let sources = Sources::embedded().expect("embedded sources");
    let mut made = 0usize;
    let mut last_taken = Instant::now();
    let mut ready_before = ready_count(&dir);
    while Path::new(&format!("/proc/{runner}")).exists() {
        let ready = ready_count(&dir);
        if ready < ready_before {
            last_taken = Instant::now();
        }
        if last_taken.elapsed() > IDLE {
            println!("no database taken for {IDLE:?}: stopping");
            break;
        }
        if ready >= READY {
            ready_before = ready;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let name = format!("fp_{runner}_pool_{made}");
        made += 1;
        let started = Instant::now();
        if let Err(e) = deploy(&mut admin, &name, &sources).await {
            println!("{name}: {e}: stopping");
            break;
        }
        File::create(dir.join(format!("{name}.ready"))).expect("marking a database ready");
        println!("{name} ready in {:?}", started.elapsed());
        ready_before = ready + 1;
    }
    drain(&mut admin, &dir).await;
    drop(lock);
}

/// Creates `name` and deploys `sources` into it on `admin`, which then
/// returns to `master`: a session left in the database would be ended by
/// the teardown of the test that takes it.
async fn deploy(admin: &mut Connection, name: &str, sources: &Sources) -> Result<(), String> {
    with_catalog_retry(admin, &format!("CREATE DATABASE [{name}];"))
        .await
        .map_err(|e| format!("creating it: {e}"))?;
    run(admin, &format!("USE [{name}];")).await?;
    let deployed = fencepost::deploy::migrate(admin, sources, &MigrateOptions::default(), &mut |_| {})
        .await
        .map(drop)
        .map_err(|e| format!("deploying it: {e}"));
    run(admin, "USE master;").await?;
    deployed
}

async fn run(admin: &mut Connection, sql: &str) -> Result<(), String> {
    match admin.simple_query(sql).await {
        Ok(stream) => stream.into_results().await.map(drop),
        Err(e) => Err(e),
    }
    .map_err(|e| format!("{sql}: {e}"))
}

/// How many databases are ready to be taken.
fn ready_count(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "ready"))
            .count()
    })
}

/// Drops every database still ready, taking each first so no test can.
async fn drain(admin: &mut Connection, dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "ready") || fs::rename(&path, path.with_extension("drained")).is_err() {
            continue;
        }
        end_sessions(admin, &format!("database_id = DB_ID(N'{name}')")).await;
        match with_catalog_retry(admin, &format!("DROP DATABASE [{name}];")).await {
            Ok(()) => println!("{name} dropped: nobody took it"),
            Err(e) => println!("warning: database {name} left behind: {e}"),
        }
    }
}
