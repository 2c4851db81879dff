//! The client when the connection breaks at chosen points of a call: a loopback
//! proxy cuts it before the request reaches the server, after the server ran it
//! but before any reply, and half way through the reply. A publish surfaces
//! `OutcomeUnknown` and resolves to exactly one publication; every other call
//! surfaces a typed network error, and a retry gets a contract outcome; the
//! pool never hands the broken connection out again; `run_fenced` publishes
//! exactly once, and one broken connection does not cost it its lease. The
//! tests share one database: each works on keys of its own, and ends only its
//! own sessions.

use crate::support;

use std::convert::Infallible;
use std::io::Write;
use std::time::Duration;

use fencepost::Client;
use fencepost::client::{Error, Fenced, OperationOutcome, Provision, Publication, Publish, Release, Renew};
use support::TestDatabase;
use support::lease::{acquired, provisioned, worker};
use support::proxy::{Cut, Proxy};
use uuid::Uuid;

const CUTS: [Cut; 3] = [Cut::BeforeRequest, Cut::BeforeReply, Cut::MidReply];
const LEASE: Duration = Duration::from_secs(60);
/// A lease the guard renews while a test breaks its connections: after a
/// renewal fails, the two thirds left leave room for a retry on a new
/// session, whose login and first call can take a busy test engine seconds.
const RENEWED: Duration = Duration::from_secs(9);

struct Setup {
    db: TestDatabase,
    proxy: Proxy,
    client: Client,
}

async fn setup(test: &str) -> Option<Setup> {
    let db = TestDatabase::shared(test).await?;
    let proxy = Proxy::start(db.connection_string().server()).await;
    let client = worker(&proxy.ado(&db.ado())).await;
    Some(Setup { db, proxy, client })
}

/// Publications of `key` recorded in the outcome table.
async fn recorded(db: &TestDatabase, key: &str) -> usize {
    let rows = db
        .query(&format!(
            "SELECT COUNT(*) FROM fence.PublishedOperation WHERE ResourceKey = N'{key}'"
        ))
        .await;
    rows[0].get::<i32, _>(0).unwrap() as usize
}

fn expect_network_error<T: std::fmt::Debug>(what: &str, cut: Cut, result: Result<T, Error>) {
    match result {
        Err(error @ Error::Network { .. }) => assert!(error.is_transient(), "{what} at {cut:?}: {error}"),
        other => panic!("{what} at {cut:?}: expected a network error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_publish_cut_anywhere_is_outcome_unknown_and_resolves_to_one_publication() {
    let test = "a_publish_cut_anywhere_is_outcome_unknown_and_resolves_to_one_publication";
    let Some(Setup { db, proxy, client }) = setup(test).await else {
        return;
    };
    for cut in CUTS {
        let key = provisioned(&client, "cut").await;
        let lease = acquired(client.acquire(&key, LEASE).await.unwrap());
        let operation = Uuid::new_v4();
        let connections = proxy.connections();
        proxy.cut_next(cut);

        let error = client.publish(&lease, operation, "payload").await.unwrap_err();
        assert_eq!(error.unknown_operation(), Some(operation), "{cut:?}: {error:?}");
        assert!(!proxy.cut_pending(), "{cut:?}: the cut never happened");

        // Resolving by asking: the server knows whether it committed.
        let known = client.outcome(operation).await.unwrap();
        let committed =
            matches!(known, OperationOutcome::Published { generation, .. } if generation == lease.generation());
        assert_eq!(
            committed,
            cut != Cut::BeforeRequest,
            "{cut:?}: GetOutcome answered {known:?}"
        );
        // The pool opened a new connection instead of reusing the broken one.
        assert_eq!(proxy.connections(), connections + 1, "{cut:?}");

        // Resolving by replay: exactly one publication either way.
        let replay = client.publish(&lease, operation, "payload").await.unwrap();
        let expected = if committed {
            Publish::AlreadyPublished
        } else {
            Publish::Published
        };
        assert_eq!(replay, expected, "{cut:?}");
        assert_eq!(recorded(&db, &key).await, 1, "{cut:?}");
        assert!(
            matches!(client.read_publication(&key).await.unwrap(),
                Publication::Found { generation, ref payload, .. } if generation == lease.generation() && payload == "payload"),
            "{cut:?}"
        );
    }
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn every_other_call_cut_anywhere_is_a_network_error_and_a_retry_answers() {
    let test = "every_other_call_cut_anywhere_is_a_network_error_and_a_retry_answers";
    let Some(Setup { db, proxy, client }) = setup(test).await else {
        return;
    };
    let mut cuts = 0;
    for cut in CUTS {
        let key = format!("cut:{}", Uuid::new_v4().simple());
        proxy.cut_next(cut);
        expect_network_error("provision", cut, client.provision(&key).await);
        let provision = client.provision(&key).await.unwrap();
        assert_eq!(
            provision,
            if cut == Cut::BeforeRequest {
                Provision::Created
            } else {
                Provision::Exists
            },
            "{cut:?}"
        );

        // A retried acquire with the same owner is answered `Acquired` with
        // the generation the lost reply carried.
        let owner = Uuid::new_v4();
        proxy.cut_next(cut);
        expect_network_error("acquire", cut, client.acquire_as(&key, owner, LEASE).await);
        let mut lease = acquired(client.acquire_as(&key, owner, LEASE).await.unwrap());
        assert_eq!(lease.generation(), 1, "{cut:?}: the retry took a new generation");

        // Renewals have a connection of their own, idle since the last
        // round: one renewal first puts it in steady use, so the cut meets
        // the renewal rather than the idle check before it.
        assert!(matches!(client.renew(&mut lease).await.unwrap(), Renew::Renewed { .. }));
        proxy.cut_next(cut);
        expect_network_error("renew", cut, client.renew(&mut lease).await);
        assert!(
            matches!(client.renew(&mut lease).await.unwrap(), Renew::Renewed { .. }),
            "{cut:?}"
        );

        proxy.cut_next(cut);
        expect_network_error("inspect", cut, client.inspect(&key).await);
        client.inspect(&key).await.unwrap();

        proxy.cut_next(cut);
        expect_network_error("read_publication", cut, client.read_publication(&key).await);
        client.read_publication(&key).await.unwrap();

        proxy.cut_next(cut);
        expect_network_error("outcome", cut, client.outcome(Uuid::new_v4()).await);
        client.outcome(Uuid::new_v4()).await.unwrap();

        proxy.cut_next(cut);
        expect_network_error("release", cut, client.release(&lease).await);
        let release = client.release(&lease).await.unwrap();
        assert_eq!(
            release,
            if cut == Cut::BeforeRequest {
                Release::Released
            } else {
                Release::NotHolder
            },
            "{cut:?}"
        );
        cuts += 7;
    }
    assert_eq!(proxy.cuts(), cuts);
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {cuts} connections cut, each call retried to an outcome"
    );
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn run_fenced_with_its_publish_cut_publishes_exactly_once() {
    let test = "run_fenced_with_its_publish_cut_publishes_exactly_once";
    let Some(Setup { db, proxy, client }) = setup(test).await else {
        return;
    };
    for cut in CUTS {
        let key = provisioned(&client, "fenced").await;
        // The work's last act arms the cut, so the next request is its publish.
        let fenced = client
            .run_fenced(&key, LEASE, |_| async {
                proxy.cut_next(cut);
                Ok::<_, Infallible>("result".to_string())
            })
            .await
            .unwrap();
        let Fenced::Published {
            generation,
            operation_id,
        } = fenced
        else {
            panic!("{cut:?}: {fenced:?}");
        };
        assert!(!proxy.cut_pending(), "{cut:?}: the cut never happened");
        assert_eq!(recorded(&db, &key).await, 1, "{cut:?}");
        assert!(matches!(
            client.outcome(operation_id).await.unwrap(),
            OperationOutcome::Published { generation: g, .. } if g == generation
        ));
    }
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn run_fenced_with_a_renewal_cut_keeps_its_lease_and_publishes_once() {
    let test = "run_fenced_with_a_renewal_cut_keeps_its_lease_and_publishes_once";
    let Some(Setup { db, proxy, client }) = setup(test).await else {
        return;
    };
    // The retry after a cut opens a new session, which on Babelfish costs
    // about a second (login, and the first compilation of Renew in that
    // session); an attempt may take half of what is left of the lease, so
    // the lease is long enough for that: 6 s.
    let lease = RENEWED;
    for cut in CUTS {
        let key = provisioned(&client, "renewal").await;
        // Armed before the first renewal (a third into the lease); the work
        // outlasts two renewal periods.
        let fenced = client
            .run_fenced(&key, lease, |_| async {
                proxy.cut_next(cut);
                tokio::time::sleep(lease * 2 / 3 + Duration::from_millis(500)).await;
                Ok::<_, Infallible>("result".to_string())
            })
            .await
            .unwrap();
        assert!(!proxy.cut_pending(), "{cut:?}: the cut never happened");
        let published = recorded(&db, &key).await;
        // One broken connection costs one renewal attempt: its retry answers
        // on a new connection, well inside the lease, so the lease is kept.
        match fenced {
            Fenced::Published { .. } => assert_eq!(published, 1, "{cut:?}"),
            other => panic!("{cut:?}: one cut renewal lost the lease: {other:?} ({published} published)"),
        }
    }
    drop(client);
    db.drop().await;
}

/// Ends, from another session, every session whose application name is
/// `name`, as an operator's KILL or a failover would. Returns how many.
async fn kill_sessions(db: &TestDatabase, name: &str) -> usize {
    let rows = db
        .query(&format!(
            "SELECT CAST(session_id AS int) FROM sys.dm_exec_sessions WHERE program_name = N'{name}'"
        ))
        .await;
    let mut admin = db.connect().await;
    let mut killed = 0;
    for row in &rows {
        let session: i32 = row.get(0).unwrap();
        let kill = format!("KILL {session};");
        let result = match admin.simple_query(&kill).await {
            Ok(stream) => stream.into_results().await.map(drop),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => killed += 1,
            // The session ended by itself between the listing and the KILL
            // (SQL Server's 6106; Babelfish raises the same text as 33557097).
            Err(tiberius::error::Error::Server(e))
                if matches!(e.code(), 6106 | 33557097)
                    && e.message().trim_end_matches('.')
                        == format!("Process ID {session} is not an active process ID") => {}
            Err(e) => panic!("{kill}: {e}"),
        }
    }
    killed
}

#[tokio::test]
async fn run_fenced_whose_session_the_server_ends_keeps_its_lease_and_publishes_once() {
    let test = "run_fenced_whose_session_the_server_ends_keeps_its_lease_and_publishes_once";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let name = format!("fp-victim-{}", Uuid::new_v4().simple());
    let client = worker(&format!("{};Application Name={name}", db.ado())).await;
    let lease = RENEWED;
    // Once while renewals run, once just before the publish.
    for before_publish in [false, true] {
        let key = provisioned(&client, "killed").await;
        let fenced = client
            .run_fenced(&key, lease, |_| async {
                if !before_publish {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                // One session for calls, and the renewals' own once a
                // renewal has run: one, or two after a renewal slow enough
                // to be sent again beside the first.
                let killed = kill_sessions(&db, &name).await;
                assert!((1..=3).contains(&killed), "the client's sessions: {killed}");
                if !before_publish {
                    tokio::time::sleep(lease * 2 / 3 + Duration::from_millis(500)).await;
                }
                Ok::<_, Infallible>("result".to_string())
            })
            .await
            .unwrap();
        let published = recorded(&db, &key).await;
        // A killed session is a broken connection like a cut: the next call
        // on it fails, and its retry answers on a new one.
        match fenced {
            Fenced::Published { .. } => assert_eq!(published, 1, "killed before publish: {before_publish}"),
            other => panic!("killed before publish: {before_publish}: {other:?} ({published} published)"),
        }
    }
    drop(client);
    db.drop().await;
}
