//! The handover signal as another session sees it: the application lock a
//! guard holds while it holds a lease (see `client::handover`), and a named
//! client's sessions waiting on a lock.

use std::time::Duration;

use fencepost::{Client, ClientConfig, Connection, ConnectionString};

use super::TestDatabase;
use super::lease::warm_up;
use sha2::{Digest, Sha256};

/// The name of the signal of `key`, as the client documents it.
pub fn signal(key: &str) -> String {
    format!("fencepost:lease:{}", hex::encode(Sha256::digest(key.as_bytes())))
}

/// What the client runs after a refused application lock request on
/// Babelfish (see `client::handover`): without it, a probe refused five
/// times on one session ends the whole server.
const CLEAR_AFTER_REFUSAL: &str = "IF @s < 0 AND SERVERPROPERTY(N'Babelfish') IS NOT NULL \
     BEGIN BEGIN TRY THROW 50000, N'clear', 1; END TRY BEGIN CATCH END CATCH; END;";

/// Whether someone holds the signal of `key` now, asked on `conn` without
/// waiting (a shared request that is let go of at once).
pub async fn signal_held(conn: &mut Connection, key: &str) -> bool {
    let resource = signal(key);
    let sql = format!(
        "DECLARE @s int; EXEC @s = sp_getapplock @Resource = N'{resource}', @LockMode = N'Shared', \
         @LockOwner = N'Session', @LockTimeout = 0; \
         IF @s >= 0 EXEC sp_releaseapplock @Resource = N'{resource}', @LockOwner = N'Session'; \
         {CLEAR_AFTER_REFUSAL} SELECT @s;"
    );
    let row = conn.simple_query(sql).await.unwrap().into_row().await.unwrap().unwrap();
    row.get::<i32, usize>(0).unwrap() < 0
}

/// How many sessions of the client named `name` wait for a lock. SQL Server
/// names the blocker of each request; Babelfish's sys.dm_exec_requests does
/// not, and PostgreSQL's pg_blocking_pids does. On Babelfish the sessions
/// are PostgreSQL's own (`pg_stat_activity`, its `application_name` the
/// client's): Babelfish 4.2's sys.dm_exec_sessions was seen to leave out a
/// session of the same client after another one was killed.
pub async fn waiting_for_a_lock(db: &TestDatabase, name: &str, babelfish: bool) -> i32 {
    let sql = if babelfish {
        format!(
            "SELECT CAST(COUNT(*) AS int) FROM pg_catalog.pg_stat_activity AS a WHERE a.application_name = N'{name}' AND EXISTS \
             (SELECT 1 FROM pg_catalog.unnest(pg_catalog.pg_blocking_pids(a.pid)) AS b (pid));"
        )
    } else {
        format!(
            "SELECT CAST(COUNT(*) AS int) FROM sys.dm_exec_requests AS r JOIN sys.dm_exec_sessions AS s \
             ON s.session_id = r.session_id WHERE s.program_name = N'{name}' AND r.blocking_session_id <> 0;"
        )
    };
    db.query(&sql).await[0].get::<i32, usize>(0).expect("a count")
}

/// Waits, at most `bound`, until session `spid` waits for a lock: SQL Server
/// names the wait LCK_M_*, Babelfish (PostgreSQL's wait event type) Lock.
pub async fn until_waiting_for_a_lock(db: &TestDatabase, spid: i32, bound: std::time::Duration) {
    let sql = format!(
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM sys.sysprocesses WHERE spid = {spid} AND blocked <> 0 \
         AND (lastwaittype LIKE N'LCK%' OR lastwaittype LIKE N'Lock%')) THEN 1 ELSE 0 END"
    );
    let waiting = async {
        while db.query(&sql).await[0].get::<i32, _>(0) != Some(1) {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(bound, waiting)
        .await
        .unwrap_or_else(|_| panic!("session {spid} never waited for a lock"));
}

/// How many sessions the client named `name` has open on the server (on
/// Babelfish, PostgreSQL's own list: see [`waiting_for_a_lock`]).
pub async fn sessions_of(db: &TestDatabase, name: &str, babelfish: bool) -> i32 {
    let sql = if babelfish {
        format!("SELECT CAST(COUNT(*) AS int) FROM pg_catalog.pg_stat_activity WHERE application_name = N'{name}';")
    } else {
        format!("SELECT CAST(COUNT(*) AS int) FROM sys.dm_exec_sessions WHERE program_name = N'{name}';")
    };
    db.query(&sql).await[0].get::<i32, usize>(0).expect("a count")
}

/// The sessions of the client named `name` that hold an exclusive session
/// application lock: its guards' signal sessions. SQL Server lists the
/// locks in sys.dm_tran_locks; Babelfish keeps them as PostgreSQL advisory
/// locks, each session's id being its backend's.
pub async fn signal_holders(db: &TestDatabase, name: &str, babelfish: bool) -> Vec<i32> {
    let sql = if babelfish {
        format!(
            "SELECT DISTINCT CAST(a.pid AS int) FROM pg_catalog.pg_stat_activity AS a \
             JOIN pg_catalog.pg_locks AS l ON l.pid = a.pid \
             WHERE a.application_name = N'{name}' AND l.locktype = N'advisory' AND l.mode = N'ExclusiveLock' AND l.granted = 'true';"
        )
    } else {
        format!(
            "SELECT DISTINCT CAST(l.request_session_id AS int) FROM sys.dm_tran_locks AS l \
             JOIN sys.dm_exec_sessions AS s ON s.session_id = l.request_session_id \
             WHERE s.program_name = N'{name}' AND l.resource_type = N'APPLICATION' \
             AND l.request_owner_type = N'SESSION' AND l.request_mode = N'X';"
        )
    };
    db.query(&sql)
        .await
        .iter()
        .map(|row| row.get::<i32, usize>(0).expect("a session id"))
        .collect()
}

/// Waits until the signal of `key` is held (a guard raises it in the
/// background, once its signal session is open: within the client's
/// checkout timeout).
pub async fn until_signal_held(conn: &mut Connection, key: &str) {
    let give_up = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while !signal_held(conn, key).await {
        assert!(
            tokio::time::Instant::now() < give_up,
            "the signal of {key} was never raised"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Waits until `count` sessions of the client named `name` wait for a lock.
pub async fn until_blocked(db: &TestDatabase, name: &str, count: i32) {
    let babelfish = db.is_babelfish().await;
    let give_up = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let blocked = waiting_for_a_lock(db, name, babelfish).await;
        if blocked == count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "{blocked} of {name}'s sessions wait for a lock, not {count}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A client named `name` on the server, with `connections` ordinary
/// connections and as many waiters' signal sessions, warmed up.
pub async fn named(db: &TestDatabase, name: &str, connections: u32) -> Client {
    let ado = format!("{};Application Name={name}", db.ado());
    let mut config = ClientConfig::new(ConnectionString::parse(&ado).unwrap());
    config
        .max_connections(connections)
        .signal_sessions(connections.max(4))
        .checkout_timeout(Duration::from_secs(2))
        .allow_privileged_login(true);
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;
    client
}

/// `key` held by `client` in a guard until its signal is raised, then
/// released: the client's session that raises the signals of `key` is open
/// (a new session costs a login, longer than a waiter settles for a
/// signal) before a timed step needs it.
pub async fn warm_guard(db: &TestDatabase, client: &Client, key: &str) {
    let lease = super::lease::acquired(client.acquire(key, Duration::from_secs(600)).await.unwrap());
    let guard = client.guard(lease);
    let mut probe = db.connect().await;
    until_signal_held(&mut probe, key).await;
    assert_eq!(guard.release().await.unwrap(), fencepost::client::Release::Released);
}

/// A name no other test uses: `fp-<what>-<uuid>`.
pub fn unique(what: &str) -> String {
    format!("fp-{what}-{}", uuid::Uuid::new_v4().simple())
}

/// The name of the waiters' queue of `key`, as the client documents it.
pub fn queue(key: &str) -> String {
    format!("fencepost:queue:{}", hex::encode(Sha256::digest(key.as_bytes())))
}

/// One waiting attempt on a key `holder` holds, so the waiter's signal
/// session is open and has compiled `Acquire` before a timed step needs it.
pub async fn warm_signal_session(holder: &Client, waiter: &Client) {
    let held = Duration::from_secs(600);
    let key = super::lease::provisioned(holder, "warm-queue").await;
    let lease = super::lease::acquired(holder.acquire(&key, held).await.unwrap());
    let answer = waiter
        .acquire_waiting(&key, held, Duration::from_millis(1500))
        .await
        .unwrap();
    assert!(matches!(answer, fencepost::client::Acquire::Busy { .. }), "{answer:?}");
    assert_eq!(
        holder.release(&lease).await.unwrap(),
        fencepost::client::Release::Released
    );
}
