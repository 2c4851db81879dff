//! Artefact publishes whose reply was lost, cut by a proxy between the client
//! and the engine: `run_fenced` settles a lost reply within the lease, and
//! what is still unknown after that (or after a single send under a held
//! guard) carries what settles it. Settling replays the same publish, source
//! version included, so the fence judges it as it would have judged the
//! first send: a stale source is refused, a fresh one published once.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use fencepost::artifact::object_store::ObjectStoreExt;
use fencepost::artifact::{ArtifactStore, FencedArtifact, Orphan, Produced, SettledArtifact, UnsettledArtifact};
use fencepost::client::{FencedOutcome, Publication, RefusalReason, Release};
use fencepost::{Client, ClientConfig, ConnectionString};
use tokio::time::Instant;

use crate::support::TestDatabase;
use crate::support::lease::{acquired, provisioned, state, warm_up, worker};
use crate::support::proxy::{Cut, Proxy};

/// Long enough that no renewal of a held guard (every third of it) comes
/// between arming a cut and the publish it is meant for.
const LEASE: Duration = Duration::from_secs(30);

/// A client whose connections all go through `proxy`, warmed up, and one
/// that reaches the engine directly, to look at what was decided.
async fn clients(db: &TestDatabase, proxy: &Proxy) -> (Client, Client) {
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(1)
        // Longer than a new session's first call on a busy engine, which
        // the warm-up pays through this client.
        .call_timeout(Duration::from_secs(6))
        .checkout_timeout(Duration::from_millis(500))
        .release_timeout(Duration::from_millis(500));
    let client = Client::connect_with(config).await.unwrap();
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&client), worker(&direct));
    (client, observer)
}

/// A store in a folder of its own, and what keeps the folder.
async fn folder_store() -> (ArtifactStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = ArtifactStore::open(&format!("file://{}", dir.path().display()), "settle")
        .await
        .unwrap();
    (store, dir)
}

/// Arms `cut` for the next request, once the guard made a moment ago has
/// raised its handover signal (a request on a session of its own, which
/// would otherwise take the cut).
async fn cut_the_next_request(proxy: &Proxy, cut: Cut) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.cut_next(cut);
}

/// Settles, trying again while the client is still reconnecting: an error
/// settles nothing, and a replay is always safe.
async fn settle(store: &ArtifactStore, client: &Client, unsettled: &UnsettledArtifact) -> SettledArtifact {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        match store.settle(client, unsettled).await {
            Ok(answer) => return answer,
            Err(error) => {
                assert!(Instant::now() < give_up, "never settled: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// What `observer` reads as the key's publication: generation, payload and
/// source version.
async fn publication(observer: &Client, key: &str) -> Option<(i64, String, Option<i64>)> {
    match observer.read_publication(key).await.unwrap() {
        Publication::Found {
            generation,
            payload,
            source_version,
            ..
        } => Some((generation, payload, source_version)),
        Publication::NothingPublished => None,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_artefact_publish_that_never_reached_the_server_settles_as_published_with_its_source_version() {
    const TEST: &str = "an_artefact_publish_that_never_reached_the_server_settles_as_published_with_its_source_version";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (client, observer) = clients(&db, &proxy).await;
    let key = provisioned(&client, "artifact-settle").await;
    let (store, _dir) = folder_store().await;
    let guard = client.guard(acquired(client.acquire(&key, LEASE).await.unwrap()));

    cut_the_next_request(&proxy, Cut::BeforeRequest).await;
    let answer = store
        .publish(&guard, Produced::from_source(Bytes::from_static(b"built from 9"), 9))
        .await
        .unwrap();
    assert!(!proxy.cut_pending(), "the cut never happened");
    let fencepost::artifact::ArtifactPublish::Unknown(unsettled) = answer else {
        panic!("the publish's reply was lost, yet its outcome reads as known: {answer:?}")
    };
    assert_eq!(unsettled.source_version(), Some(9));
    assert!(!unsettled.releases(), "a held guard's publish keeps its lease");
    assert_eq!(publication(&observer, &key).await, None, "the first send never arrived");

    // The replay is the publish that commits, with the source version the
    // first send carried.
    let SettledArtifact::Published(published) = settle(&store, &client, &unsettled).await else {
        panic!("a replay under a held lease was not published")
    };
    assert_eq!(&published.pointer, unsettled.pointer());
    assert_eq!(
        publication(&observer, &key).await,
        Some((guard.lease().generation(), unsettled.pointer().to_payload(), Some(9)))
    );
    assert_eq!(state(&observer, &key).await.3, Some(guard.lease().generation()));
    // Settled for good, and the guard's lease is still held.
    assert!(matches!(
        settle(&store, &client, &unsettled).await,
        SettledArtifact::Published(_)
    ));
    assert!(state(&observer, &key).await.1, "settling ended the held guard's lease");
    let read = store.read_artifact(&observer, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"built from 9"));
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}

#[tokio::test]
async fn a_settled_artefact_publish_is_refused_as_stale_when_a_newer_source_was_written_meanwhile() {
    const TEST: &str = "a_settled_artefact_publish_is_refused_as_stale_when_a_newer_source_was_written_meanwhile";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (client, observer) = clients(&db, &proxy).await;
    let key = provisioned(&client, "artifact-settle-stale").await;
    let (store, _dir) = folder_store().await;
    let guard = client.guard(acquired(client.acquire(&key, LEASE).await.unwrap()));

    cut_the_next_request(&proxy, Cut::BeforeRequest).await;
    let answer = store
        .publish(&guard, Produced::from_source(Bytes::from_static(b"built from 5"), 5))
        .await
        .unwrap();
    let fencepost::artifact::ArtifactPublish::Unknown(unsettled) = answer else {
        panic!("{answer:?}")
    };
    // Under the same lease, a write built from a newer source commits.
    let written = guard
        .fenced_transaction_versioned(9, async |_| Ok::<_, Infallible>(()))
        .await
        .unwrap();
    assert!(matches!(written, FencedOutcome::Committed(())), "{written:?}");

    // A replay without its source version would publish the older build;
    // the settle carries it, and the fence refuses it.
    let settled = settle(&store, &client, &unsettled).await;
    assert_eq!(
        settled,
        SettledArtifact::Refused {
            reason: RefusalReason::StaleSource,
            orphan: Orphan::Deleted
        }
    );
    assert_eq!(publication(&observer, &key).await, None);
    let location = fencepost::artifact::object_store::path::Path::parse(&unsettled.pointer().location).unwrap();
    assert!(
        matches!(
            store.object_store().head(&location).await,
            Err(fencepost::artifact::object_store::Error::NotFound { .. })
        ),
        "the refused upload was kept"
    );
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}

/// `run_fenced` whose publish loses its first reply at `cut`: the replay
/// within the lease settles it, and the artefact is published with its
/// source version, the lease given back.
async fn run_fenced_settles_a_lost_reply_within_the_lease(test: &str, cut: Cut) {
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (client, observer) = clients(&db, &proxy).await;
    let key = provisioned(&client, "artifact-run-settle").await;
    let (store, _dir) = folder_store().await;
    let run = store
        .run_fenced(&client, &key, LEASE, |_| async {
            cut_the_next_request(&proxy, cut).await;
            Ok::<_, Infallible>(Produced::from_source(Bytes::from_static(b"the report"), 9))
        })
        .await
        .unwrap();
    assert!(!proxy.cut_pending(), "the cut never happened");
    let FencedArtifact::Published(published) = run else {
        panic!("a reply lost once was not settled within the lease: {run:?}")
    };
    assert_eq!(
        publication(&observer, &key).await,
        Some((published.generation, published.pointer.to_payload(), Some(9)))
    );
    assert!(!state(&observer, &key).await.1, "the lease was not given back");
    let read = store.read_artifact(&observer, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"the report"));
    drop((client, observer));
    db.drop().await;
}

#[tokio::test]
async fn run_fenced_settles_a_publish_whose_reply_was_lost_after_it_committed() {
    run_fenced_settles_a_lost_reply_within_the_lease(
        "run_fenced_settles_a_publish_whose_reply_was_lost_after_it_committed",
        Cut::BeforeReply,
    )
    .await;
}

#[tokio::test]
async fn run_fenced_settles_a_publish_that_never_reached_the_server() {
    run_fenced_settles_a_lost_reply_within_the_lease(
        "run_fenced_settles_a_publish_that_never_reached_the_server",
        Cut::BeforeRequest,
    )
    .await;
}

#[tokio::test]
async fn run_fenced_whose_every_reply_is_lost_answers_unknown_and_settles_with_its_source_version() {
    const TEST: &str = "run_fenced_whose_every_reply_is_lost_answers_unknown_and_settles_with_its_source_version";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (client, observer) = clients(&db, &proxy).await;
    let key = provisioned(&client, "artifact-run-unsettled").await;
    let (store, _dir) = folder_store().await;
    let run = store
        .run_fenced(&client, &key, Duration::from_secs(10), |_| async {
            // The publish reaches the server, which commits it; its reply is
            // cut, and no new connection can sign in for a replay.
            cut_the_next_request(&proxy, Cut::BeforeReply).await;
            proxy.hold_replies(true);
            Ok::<_, Infallible>(Produced::from_source(Bytes::from_static(b"the report"), 9))
        })
        .await;
    assert!(!proxy.cut_pending(), "the cut never happened");
    let run = run.expect("a publish that may have committed was reported as an error");
    let FencedArtifact::Unknown(unsettled) = run else {
        panic!("every reply was lost, yet the outcome reads as known: {run:?}")
    };
    assert_eq!(unsettled.lease().key(), key);
    assert_eq!(unsettled.source_version(), Some(9));
    assert!(unsettled.releases());

    // The server comes back; the replay answers for good.
    proxy.hold_replies(false);
    let SettledArtifact::Published(published) = settle(&store, &client, &unsettled).await else {
        panic!("the first send committed, yet it settled otherwise")
    };
    assert_eq!(
        settle(&store, &client, &unsettled).await,
        SettledArtifact::Published(published.clone())
    );
    assert_eq!(
        publication(&observer, &key).await,
        Some((published.generation, published.pointer.to_payload(), Some(9)))
    );
    let read = store.read_artifact(&observer, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"the report"));
    drop((client, observer));
    db.drop().await;
}

#[tokio::test]
async fn a_committed_artefact_publish_settled_after_its_record_was_pruned_keeps_its_object_and_answers_published() {
    const TEST: &str =
        "a_committed_artefact_publish_settled_after_its_record_was_pruned_keeps_its_object_and_answers_published";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (client, observer) = clients(&db, &proxy).await;
    let key = provisioned(&client, "artifact-settle-pruned").await;
    let (store, _dir) = folder_store().await;
    let guard = client.guard(acquired(client.acquire(&key, LEASE).await.unwrap()));

    // The publish commits; its reply is lost.
    cut_the_next_request(&proxy, Cut::BeforeReply).await;
    let answer = store
        .publish(&guard, Produced::from_source(Bytes::from_static(b"built from 3"), 3))
        .await
        .unwrap();
    assert!(!proxy.cut_pending(), "the cut never happened");
    let fencepost::artifact::ArtifactPublish::Unknown(unsettled) = answer else {
        panic!("the publish's reply was lost, yet its outcome reads as known: {answer:?}")
    };
    let committed = Some((guard.lease().generation(), unsettled.pointer().to_payload(), Some(3)));
    assert_eq!(publication(&observer, &key).await, committed);

    // Its record ages past the replay window and is pruned: the replay is
    // judged afresh and refused (GenerationAlreadyPublished).
    db.exec(&format!(
        "UPDATE fence.PublishedOperation SET PublishedAtUtc = DATEADD(DAY, -3, PublishedAtUtc) \
         WHERE OperationId = '{}';",
        unsettled.operation_id()
    ))
    .await;
    db.exec("EXEC fence_admin.PruneOutcomes @OlderThanDays = 1;").await;

    // The fence row still points to the upload: settling answers published
    // and keeps it.
    let SettledArtifact::Published(published) = settle(&store, &client, &unsettled).await else {
        panic!("a committed publish whose record was pruned did not settle as published")
    };
    assert_eq!(&published.pointer, unsettled.pointer());
    assert_eq!(publication(&observer, &key).await, committed);
    let read = store.read_artifact(&observer, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"built from 3"));
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}
