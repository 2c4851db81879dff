//! Fenced artefacts against the engine and a real store: a folder always,
//! and Azurite (Azure Blob's emulator) when `FENCEPOST_TEST_AZURITE` names
//! its store URL (`az://CONTAINER`, with `AZURE_STORAGE_USE_EMULATOR=true`
//! and `AZURITE_BLOB_STORAGE_URL` set as object_store reads them; `.ci/run`
//! starts it). A worker whose lease was taken over uploads, and nothing it
//! wrote is ever read as the result; the sweep removes its orphan and never
//! a published or in-flight artefact. The tests share one database: each
//! works on keys and a prefix of its own.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use fencepost::artifact::{
    ArtifactError, ArtifactPath, ArtifactPublish, ArtifactStore, FencedArtifact, KeptBecause, Orphan, Pointer,
    Produced, Sweep, SweepReport, open_url,
};
use fencepost::client::admin::ForceRelease;
use fencepost::client::{Publish, RefusalReason};
use futures_util::TryStreamExt;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::support::artifact_upload;
use crate::support::caller::Caller;
use crate::support::gated_store::GatedStore;
use crate::support::lease::{acquired, provisioned, unwarmed, workers};
use crate::support::overwriting_store::OverwritingStore;
use crate::support::{self, TestDatabase};

/// Renewed about every second.
pub(crate) const LEASE: Duration = Duration::from_secs(3);

/// The variable naming Azurite's store URL.
const AZURITE: &str = "FENCEPOST_TEST_AZURITE";

/// Where a test's artefacts go.
pub(crate) enum Backend {
    Folder,
    Azurite,
}

/// The store URL for `backend` and what keeps it alive, or `None` (with a
/// skip line) when Azurite is not there. Under FENCEPOST_REQUIRE_LIVE=1 a
/// missing Azurite fails the test instead.
pub(crate) fn store_url(test: &str, backend: Backend) -> Option<(String, Option<tempfile::TempDir>)> {
    match backend {
        Backend::Folder => {
            let dir = tempfile::tempdir().unwrap();
            Some((format!("file://{}", dir.path().display()), Some(dir)))
        }
        Backend::Azurite => match std::env::var(AZURITE) {
            Ok(url) if !url.trim().is_empty() => Some((url, None)),
            _ => {
                if std::env::var("FENCEPOST_REQUIRE_LIVE").as_deref() == Ok("1") {
                    panic!("{test}: FENCEPOST_REQUIRE_LIVE=1 but {AZURITE} is not set in this test's environment");
                }
                support::skip(test, &format!("{AZURITE} not set"));
                None
            }
        },
    }
}

/// A prefix of the test's own, so tests sharing a container never see each
/// other's objects.
pub(crate) fn own_prefix() -> String {
    format!("fencepost-test/{}", Uuid::new_v4().simple())
}

/// A sweep of `prefix` with `grace`, judged by `reader`'s database, as of
/// `later` from now on the sweep's clock.
async fn swept(
    store: &dyn ObjectStore,
    prefix: &Path,
    reader: &fencepost::Client,
    grace: Duration,
    later: TimeDelta,
) -> Result<SweepReport, ArtifactError> {
    Sweep::new(grace)
        .unwrap()
        .run(
            store,
            prefix,
            reader,
            Utc::now() + later,
            &CancellationToken::new(),
            |_| {},
        )
        .await
}

/// The objects under `prefix` but its mark, which every store opened to
/// publish writes.
async fn listed(store: &dyn ObjectStore, prefix: &Path) -> Vec<String> {
    let mark = format!("{prefix}/_fencepost");
    let mut all: Vec<String> = store
        .list(Some(prefix))
        .map_ok(|meta| meta.location.to_string())
        .try_filter(|location| std::future::ready(*location != mark))
        .try_collect()
        .await
        .unwrap();
    all.sort();
    all
}

async fn a_stale_worker_s_artefact_is_never_what_readers_see(test: &str, backend: Backend) {
    let Some((url, _dir)) = store_url(test, backend) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [stale, successor, reader] = workers(&db.ado()).await;
    let operator = unwarmed(&db.ado()).await.admin();
    let key = provisioned(&stale, "artifact-stale").await;
    let prefix = own_prefix();
    let (inner, base) = open_url(&url).unwrap();
    // The stale worker's deletes fail, so its upload stays as an orphan.
    let gate = GatedStore::new(inner.clone(), true);
    let stale_store = ArtifactStore::new(gate.clone(), &base, &prefix).await.unwrap();
    let successor_store = ArtifactStore::new(inner.clone(), &base, &prefix).await.unwrap();
    gate.arm();

    let guard = stale.guard(acquired(stale.acquire(&key, LEASE).await.unwrap()));
    let stale_lease = guard.lease();
    let stale_generation = stale_lease.generation();
    let stale_run = tokio::spawn(async move {
        stale_store
            .publish_and_release(guard, Produced::new(Bytes::from_static(b"stale worker's report")))
            .await
    });
    // The stale worker's upload is in the store; its pointer is not sent yet.
    let stale_path = gate.uploaded().await;
    assert_eq!(
        ArtifactPath::parse(successor_store.prefix(), &stale_path).map(|p| (p.key, p.generation)),
        Some((key.clone(), stale_generation))
    );
    // An operator fences it out and the successor takes over.
    assert!(matches!(
        operator.force_release(&key).await.unwrap(),
        ForceRelease::Fenced { .. }
    ));
    let run = successor_store
        .run_fenced(&successor, &key, LEASE, |_stop| async {
            Ok::<_, Infallible>(Produced::new(Bytes::from_static(b"successor's report")))
        })
        .await
        .unwrap();
    let FencedArtifact::Published(published) = run else {
        panic!("the successor's artefact was not published: {run:?}")
    };
    assert!(published.generation > stale_generation);

    // The stale worker goes on: its pointer is refused by the fence, or
    // never sent, because its guard saw the lease lost first or because the
    // upload outlasted the lease (held back here past the successor's
    // publish, on a busy engine that can be more than a lease length).
    gate.proceed();
    let stale_outcome = stale_run.await.unwrap().unwrap();
    eprintln!("the stale worker's publish ended as {stale_outcome:?}");
    let orphan = match stale_outcome {
        ArtifactPublish::Refused { orphan, .. }
        | ArtifactPublish::Lost {
            orphan: Some(orphan), ..
        }
        | ArtifactPublish::UploadTooSlow { orphan, .. } => orphan,
        other => panic!("the stale worker's artefact was not refused: {other:?}"),
    };
    assert!(
        matches!(&orphan, Orphan::Left { location, .. } if *location == stale_path.to_string()),
        "{orphan:?}"
    );

    // Readers see the successor's bytes, never the stale worker's, which
    // are still in the store.
    let read = successor_store.read_artifact(&reader, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"successor's report"));
    assert_eq!(read.generation, published.generation);
    assert_eq!(read.pointer, published.pointer);
    assert!(inner.head(&stale_path).await.is_ok(), "the orphan was meant to stay");
    // Its pointer sent straight to the fence under its old lease is refused.
    let stale_pointer = Pointer {
        location: stale_path.to_string(),
        ..published.pointer.clone()
    };
    assert_eq!(
        stale
            .publish(&stale_lease, Uuid::new_v4(), &stale_pointer.to_payload())
            .await
            .unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );

    // The sweep, past its grace, deletes the orphan and keeps the publication.
    let report = swept(
        inner.as_ref(),
        successor_store.prefix(),
        &reader,
        LEASE * 2 + Duration::from_secs(1),
        TimeDelta::minutes(1),
    )
    .await
    .unwrap();
    let deleted: Vec<_> = report.deleted.iter().map(|d| d.object.location.clone()).collect();
    assert_eq!(deleted, vec![stale_path.to_string()]);
    let kept: Vec<_> = report
        .kept
        .iter()
        .map(|k| (k.object.location.clone(), k.why.clone()))
        .collect();
    assert_eq!(kept, vec![(published.pointer.location.clone(), KeptBecause::Published)]);
    assert_eq!(
        listed(inner.as_ref(), successor_store.prefix()).await,
        vec![published.pointer.location.clone()]
    );
    let again = successor_store.read_artifact(&reader, &key).await.unwrap();
    assert_eq!(again.bytes, Bytes::from_static(b"successor's report"));
    drop((stale, successor, reader, operator));
    db.drop().await;
}

#[tokio::test]
async fn a_stale_worker_s_artefact_in_a_folder_is_never_what_readers_see() {
    a_stale_worker_s_artefact_is_never_what_readers_see(
        "a_stale_worker_s_artefact_in_a_folder_is_never_what_readers_see",
        Backend::Folder,
    )
    .await;
}

#[tokio::test]
async fn a_stale_worker_s_artefact_on_azurite_is_never_what_readers_see() {
    a_stale_worker_s_artefact_is_never_what_readers_see(
        "a_stale_worker_s_artefact_on_azurite_is_never_what_readers_see",
        Backend::Azurite,
    )
    .await;
}

async fn workers_racing_on_one_key_leave_one_published_artefact(test: &str, backend: Backend) {
    let Some((url, _dir)) = store_url(test, backend) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let clients = workers::<4>(&db.ado()).await;
    let key = provisioned(&clients[0], "artifact-race").await;
    let store = ArtifactStore::open(&url, &own_prefix()).await.unwrap();
    // The one that got the lease holds it until every other run has
    // answered, so all of them raced for the same lease.
    let answered = Arc::new(tokio::sync::Semaphore::new(0));
    let others = (clients.len() - 1) as u32;
    let runs = futures_util::future::join_all(clients.iter().enumerate().map(|(n, client)| {
        let store = store.clone();
        let key = key.clone();
        let answered = answered.clone();
        async move {
            let hold = answered.clone();
            let run = store
                .run_fenced(client, &key, Duration::from_secs(30), move |_stop| async move {
                    let _all = hold.acquire_many(others).await.unwrap();
                    Ok::<_, Infallible>(Produced::new(format!("worker {n}").into_bytes()))
                })
                .await
                .unwrap();
            answered.add_permits(1);
            run
        }
    }));
    let runs = tokio::time::timeout(Duration::from_secs(60), runs)
        .await
        .expect("a run got the lease while another held it, or none answered");
    let published: Vec<_> = runs
        .iter()
        .enumerate()
        .filter_map(|(n, run)| match run {
            FencedArtifact::Published(published) => Some((n, published.clone())),
            _ => None,
        })
        .collect();
    // The others found the lease held; none published.
    assert_eq!(published.len(), 1, "{runs:?}");
    for run in &runs {
        assert!(
            matches!(run, FencedArtifact::Published(_) | FencedArtifact::Busy { .. }),
            "{run:?}"
        );
    }
    let (winner, pointer) = (published[0].0, published[0].1.pointer.clone());
    assert_eq!(
        listed(store.object_store().as_ref(), store.prefix()).await,
        vec![pointer.location.clone()]
    );
    let read = store.read_artifact(&clients[3], &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from(format!("worker {winner}")));
    drop(clients);
    db.drop().await;
}

#[tokio::test]
async fn workers_racing_on_one_key_leave_one_published_artefact_in_a_folder() {
    workers_racing_on_one_key_leave_one_published_artefact(
        "workers_racing_on_one_key_leave_one_published_artefact_in_a_folder",
        Backend::Folder,
    )
    .await;
}

#[tokio::test]
async fn workers_racing_on_one_key_leave_one_published_artefact_on_azurite() {
    workers_racing_on_one_key_leave_one_published_artefact(
        "workers_racing_on_one_key_leave_one_published_artefact_on_azurite",
        Backend::Azurite,
    )
    .await;
}

async fn the_sweep_never_takes_an_upload_whose_publish_may_still_commit(test: &str, backend: Backend) {
    let Some((url, _dir)) = store_url(test, backend) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [worker, reader] = workers(&db.ado()).await;
    let key = provisioned(&worker, "artifact-in-flight").await;
    let prefix = own_prefix();
    let (inner, base) = open_url(&url).unwrap();
    let gate = GatedStore::new(inner.clone(), false);
    let store = ArtifactStore::new(gate.clone(), &base, &prefix).await.unwrap();
    gate.arm();
    let guard = worker.guard(acquired(worker.acquire(&key, LEASE).await.unwrap()));
    let publishing = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .publish_and_release(guard, Produced::from_source(Bytes::from_static(b"in flight"), 9))
                .await
        })
    };
    let in_flight = gate.uploaded().await;
    // Swept as of an hour later, far past its grace: nothing points to the
    // upload yet, but its lease is held, so its publish may still commit
    // (a reply lost and replayed, say) and it is kept however old.
    let report = swept(
        inner.as_ref(),
        store.prefix(),
        &reader,
        LEASE * 2 + Duration::from_secs(1),
        TimeDelta::hours(1),
    )
    .await
    .unwrap();
    assert!(report.deleted.is_empty(), "{report:?}");
    assert_eq!(report.kept.len(), 1);
    assert_eq!(report.kept[0].object.location, in_flight.to_string());
    assert_eq!(report.kept[0].why, KeptBecause::PublishMayCommit);

    gate.proceed();
    let ArtifactPublish::Published(published) = publishing.await.unwrap().unwrap() else {
        panic!("the in-flight artefact was not published")
    };
    assert_eq!(published.pointer.location, in_flight.to_string());
    assert_eq!(published.pointer.source_version, Some(9));
    let read = store.read_artifact(&reader, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"in flight"));
    drop((worker, reader));
    db.drop().await;
}

#[tokio::test]
async fn the_sweep_never_takes_an_upload_in_a_folder_whose_publish_may_still_commit() {
    the_sweep_never_takes_an_upload_whose_publish_may_still_commit(
        "the_sweep_never_takes_an_upload_in_a_folder_whose_publish_may_still_commit",
        Backend::Folder,
    )
    .await;
}

#[tokio::test]
async fn the_sweep_never_takes_an_upload_on_azurite_whose_publish_may_still_commit() {
    the_sweep_never_takes_an_upload_whose_publish_may_still_commit(
        "the_sweep_never_takes_an_upload_on_azurite_whose_publish_may_still_commit",
        Backend::Azurite,
    )
    .await;
}

/// A lease left to expire (its holder gone, never given back): the upload of
/// its generation is kept however long ago the lease expired, since a
/// publish judged before the expiry may still commit in a transaction that
/// commits late; once a committed write ends the tenure (an operator's
/// force-release here) it is deleted.
#[tokio::test]
async fn the_sweep_keeps_an_upload_of_a_lease_left_to_expire_until_a_committed_write_ends_its_tenure() {
    let test = "the_sweep_keeps_an_upload_of_a_lease_left_to_expire_until_a_committed_write_ends_its_tenure";
    let Some((url, _dir)) = store_url(test, Backend::Folder) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [worker] = workers(&db.ado()).await;
    let key = provisioned(&worker, "artifact-expired").await;
    let store = ArtifactStore::open(&url, &own_prefix()).await.unwrap();
    let lease = acquired(worker.acquire(&key, Duration::from_secs(1)).await.unwrap());
    let upload = ArtifactPath {
        key: key.clone(),
        generation: lease.generation(),
        operation_id: Uuid::new_v4(),
    }
    .to_path(store.prefix());
    store
        .object_store()
        .put(&upload, PutPayload::from_static(b"its holder crashed"))
        .await
        .unwrap();
    // The holder is gone: the lease expires on the server, never released.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sweep = || async {
        // Every object is past the grace by the sweep's clock.
        let later = TimeDelta::hours(2);
        swept(
            store.object_store().as_ref(),
            store.prefix(),
            &worker,
            Duration::from_secs(1),
            later,
        )
        .await
        .unwrap()
    };
    let expired = sweep().await;
    assert!(expired.deleted.is_empty(), "{expired:?}");
    assert_eq!(expired.kept.len(), 1, "{expired:?}");
    assert_eq!(expired.kept[0].why, KeptBecause::PublishMayCommit);

    assert!(matches!(
        worker.admin().force_release(&key).await.unwrap(),
        ForceRelease::Fenced { .. }
    ));
    let fenced = sweep().await;
    let deleted: Vec<_> = fenced.deleted.iter().map(|d| d.object.location.clone()).collect();
    assert_eq!(deleted, [upload.to_string()], "{fenced:?}");
    drop(worker);
    db.drop().await;
}

/// The contract lets a service publish inside its own transaction: the lease
/// is judged when the row is locked, and the publish takes effect when the
/// caller commits, however long after the lease's expiry. A sweep meanwhile
/// (a reader that does not wait for the row: Babelfish, or SQL Server with
/// READ_COMMITTED_SNAPSHOT on) sees the lease expired and nothing published,
/// and must keep the upload the publication is about to name.
#[tokio::test]
async fn the_sweep_keeps_the_upload_of_a_publish_that_commits_late_in_a_caller_transaction() {
    let test = "the_sweep_keeps_the_upload_of_a_publish_that_commits_late_in_a_caller_transaction";
    let Some((url, _dir)) = store_url(test, Backend::Folder) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [reader] = workers(&db.ado()).await;
    let key = provisioned(&reader, "artifact-late-commit").await;
    let store = ArtifactStore::open(&url, &own_prefix()).await.unwrap();
    let mut caller = Caller::new(db.connect().await);
    let owner = Uuid::new_v4();
    let acquired = caller.acquire(&key, owner, 2).await;
    assert_eq!(acquired.outcome(), "Acquired");
    let generation = acquired.big("Generation").unwrap();
    let operation_id = Uuid::new_v4();
    let path = ArtifactPath {
        key: key.clone(),
        generation,
        operation_id,
    }
    .to_path(store.prefix());
    store
        .object_store()
        .put(&path, PutPayload::from_static(b"late"))
        .await
        .unwrap();
    let pointer = artifact_upload::pointer_to(&path, b"late");

    caller.begin("READ COMMITTED").await.unwrap();
    let answer = caller
        .publish(&key, owner, generation, operation_id, &pointer.to_payload())
        .await;
    assert_eq!(answer.outcome(), "Published");
    // The lease (2 s) ends, and more than the grace passes, the caller's
    // transaction still open.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let report = swept(
        store.object_store().as_ref(),
        store.prefix(),
        &reader,
        Duration::from_secs(1),
        TimeDelta::hours(1),
    )
    .await;
    caller.commit().await.unwrap();
    let swept = report.unwrap();
    assert!(swept.deleted.is_empty(), "{swept:?}");
    let read = store.read_artifact(&reader, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"late"));
    drop(reader);
    db.drop().await;
}

async fn the_sweep_command_deletes_an_orphan_and_keeps_the_publication(test: &str, backend: Backend) {
    let Some((url, _dir)) = store_url(test, backend) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [worker] = workers(&db.ado()).await;
    let key = provisioned(&worker, "artifact-sweep-cli").await;
    let prefix = own_prefix();
    let store = ArtifactStore::open(&url, &prefix).await.unwrap();
    let run = store
        .run_fenced(&worker, &key, Duration::from_secs(1), |_stop| async {
            Ok::<_, Infallible>(Produced::new(Bytes::from_static(b"published")))
        })
        .await
        .unwrap();
    let FencedArtifact::Published(published) = run else {
        panic!("{run:?}")
    };
    // What a worker that crashed between its upload and its publish leaves.
    let orphan = ArtifactPath {
        key: key.clone(),
        generation: published.generation,
        operation_id: Uuid::new_v4(),
    }
    .to_path(store.prefix());
    store
        .object_store()
        .put(&orphan, PutPayload::from_static(b"crashed"))
        .await
        .unwrap();
    // The grace is 3 s for leases of at most 1 s: wait, on the store's own
    // clock, until both objects are older than that.
    let grace = Duration::from_secs(3);
    let orphan_written = store.object_store().head(&orphan).await.unwrap().last_modified;
    let past_grace = orphan_written + TimeDelta::from_std(grace + Duration::from_millis(500)).unwrap();
    while Utc::now() < past_grace {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let output = sweep_by_command(&db, &url, &prefix).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["interrupted"], false);
    assert_eq!(report["deleted"].as_array().unwrap().len(), 1, "{report:#}");
    assert_eq!(report["deleted"][0]["location"], orphan.to_string());
    assert_eq!(report["deleted"][0]["why"], "orphan");
    assert_eq!(report["kept"].as_array().unwrap().len(), 1, "{report:#}");
    assert_eq!(report["kept"][0]["location"], published.pointer.location);
    assert_eq!(report["kept"][0]["why"]["reason"], "published");
    assert!(matches!(
        store.object_store().head(&orphan).await,
        Err(fencepost::artifact::object_store::Error::NotFound { .. })
    ));
    let read = store.read_artifact(&worker, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"published"));
    drop(worker);
    db.drop().await;
}

#[tokio::test]
async fn the_sweep_command_deletes_an_orphan_in_a_folder_and_keeps_the_publication() {
    the_sweep_command_deletes_an_orphan_and_keeps_the_publication(
        "the_sweep_command_deletes_an_orphan_in_a_folder_and_keeps_the_publication",
        Backend::Folder,
    )
    .await;
}

#[tokio::test]
async fn the_sweep_command_deletes_an_orphan_on_azurite_and_keeps_the_publication() {
    the_sweep_command_deletes_an_orphan_and_keeps_the_publication(
        "the_sweep_command_deletes_an_orphan_on_azurite_and_keeps_the_publication",
        Backend::Azurite,
    )
    .await;
}

/// A sweep run against a database that does not know the store's keys (the
/// wrong environment, a stale connection) keeps their objects, says why, and
/// exits 1 rather than 0.
#[tokio::test]
async fn the_sweep_command_keeps_the_objects_of_a_key_with_no_fence_row_and_exits_1() {
    let test = "the_sweep_command_keeps_the_objects_of_a_key_with_no_fence_row_and_exits_1";
    let Some((url, _dir)) = store_url(test, Backend::Folder) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let prefix = own_prefix();
    let store = ArtifactStore::open(&url, &prefix).await.unwrap();
    let unknown = ArtifactPath {
        key: format!("another-database-{}", Uuid::new_v4()),
        generation: 7,
        operation_id: Uuid::new_v4(),
    }
    .to_path(store.prefix());
    store
        .object_store()
        .put(&unknown, PutPayload::from_static(b"published elsewhere"))
        .await
        .unwrap();
    let written = store.object_store().head(&unknown).await.unwrap().last_modified;
    let past_grace = written + TimeDelta::from_std(Duration::from_millis(3500)).unwrap();
    while Utc::now() < past_grace {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A URL that carries a signature (object_store ignores it) is never
    // printed with it.
    let signed = format!("{url}?sig=topsecret");
    let output = sweep_by_command(&db, &signed, &prefix).await;
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("topsecret"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["deleted"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["kept"][0]["location"], unknown.to_string(), "{report:#}");
    assert_eq!(report["kept"][0]["why"]["reason"], "not_provisioned", "{report:#}");
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(store.object_store().head(&unknown).await.is_ok());
    db.drop().await;
}

/// Azurite enforces create-only writes; the same store behind a layer that
/// overwrites (as some S3-compatible stores and proxies do) is refused.
#[tokio::test]
async fn azurite_is_trusted_and_the_same_store_that_ignores_create_only_writes_is_refused() {
    const TEST: &str = "azurite_is_trusted_and_the_same_store_that_ignores_create_only_writes_is_refused";
    let Some((url, _)) = store_url(TEST, Backend::Azurite) else {
        return;
    };
    let prefix = own_prefix();
    let (inner, base) = open_url(&url).unwrap();
    ArtifactStore::new(inner.clone(), &base, &prefix).await.unwrap();
    let overwriting = Arc::new(OverwritingStore { inner: inner.clone() });
    let refused = ArtifactStore::new(overwriting, &base, &prefix).await.unwrap_err();
    assert!(
        matches!(refused, ArtifactError::CreateNotEnforced { .. }),
        "{refused:?}"
    );
    assert!(
        listed(
            inner.as_ref(),
            &fencepost::artifact::join_prefix(&base, &prefix).unwrap()
        )
        .await
        .is_empty()
    );

    let output = support::binary::fencepost(["artifact", "verify", "--store", &url, "--prefix", &prefix])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn a_work_whose_lease_was_taken_over_uploads_nothing(test: &str, backend: Backend) {
    let Some((url, _dir)) = store_url(test, backend) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [worker] = workers(&db.ado()).await;
    let operator = unwarmed(&db.ado()).await.admin();
    let key = provisioned(&worker, "artifact-taken-over").await;
    let store = ArtifactStore::open(&url, &own_prefix()).await.unwrap();
    let (started, is_running) = tokio::sync::oneshot::channel();
    let run = store.run_fenced(&worker, &key, LEASE, |stop| async move {
        let _ = started.send(());
        // Finishes only once the guard has seen the lease lost.
        stop.cancelled().await;
        Ok::<_, Infallible>(Produced::new(Bytes::from_static(b"made without the lease")))
    });
    let take_over = async {
        is_running.await.unwrap();
        assert!(matches!(
            operator.force_release(&key).await.unwrap(),
            ForceRelease::Fenced { .. }
        ));
    };
    let (run, ()) = tokio::join!(run, take_over);
    let run = run.unwrap();
    assert!(matches!(run, FencedArtifact::Lost { orphan: None, .. }), "{run:?}");
    assert!(listed(store.object_store().as_ref(), store.prefix()).await.is_empty());
    assert!(matches!(
        store.read_artifact(&worker, &key).await,
        Err(ArtifactError::NothingPublished { .. })
    ));
    drop((worker, operator));
    db.drop().await;
}

#[tokio::test]
async fn a_work_whose_lease_was_taken_over_uploads_nothing_to_a_folder() {
    a_work_whose_lease_was_taken_over_uploads_nothing(
        "a_work_whose_lease_was_taken_over_uploads_nothing_to_a_folder",
        Backend::Folder,
    )
    .await;
}

#[tokio::test]
async fn a_work_whose_lease_was_taken_over_uploads_nothing_to_azurite() {
    a_work_whose_lease_was_taken_over_uploads_nothing(
        "a_work_whose_lease_was_taken_over_uploads_nothing_to_azurite",
        Backend::Azurite,
    )
    .await;
}

/// `fencepost artifact sweep` of `prefix` in the store at `url`, against
/// `db`, with a 3 s grace for leases of at most 1 s, answering in JSON.
async fn sweep_by_command(db: &TestDatabase, url: &str, prefix: &str) -> std::process::Output {
    support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        [
            "artifact",
            "sweep",
            "--store",
            url,
            "--prefix",
            prefix,
            "--older-than",
            "3s",
            "--format",
            "json",
        ],
    ))
    .output()
    .await
    .unwrap()
}

/// An object whose name decodes to a key the engine refuses (a NUL, which
/// PostgreSQL's text cannot hold) is kept in doubt, and the sweep judges the
/// keys after it instead of stopping at it on every run.
#[tokio::test]
async fn an_object_whose_key_the_engine_refuses_is_kept_in_doubt_and_the_sweep_goes_on() {
    let test = "an_object_whose_key_the_engine_refuses_is_kept_in_doubt_and_the_sweep_goes_on";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [reader] = workers(&db.ado()).await;
    let store = ArtifactStore::open("memory://", "fenced").await.unwrap();
    let mut put = Vec::new();
    // In name order the odd key comes first (`a_00b` < `z…`).
    for key in ["a\0b", "zz-orphaned"] {
        let path = ArtifactPath {
            key: key.into(),
            generation: 1,
            operation_id: Uuid::new_v4(),
        }
        .to_path(store.prefix());
        store
            .object_store()
            .put(&path, PutPayload::from_static(b"x"))
            .await
            .unwrap();
        put.push(path.to_string());
    }
    let swept = swept(
        store.object_store().as_ref(),
        store.prefix(),
        &reader,
        Duration::from_secs(1),
        TimeDelta::hours(1),
    )
    .await
    .unwrap();
    assert!(swept.failed.is_none(), "{swept:?}");
    let odd = swept.kept.iter().find(|k| k.object.location == put[0]);
    let odd = odd.unwrap_or_else(|| panic!("{swept:?}"));
    assert!(matches!(odd.why, KeptBecause::UnreadableKey(_)), "{swept:?}");
    // The key after it was judged: it has no fence row here.
    let next = swept.kept.iter().find(|k| k.object.location == put[1]);
    assert_eq!(next.map(|k| &k.why), Some(&KeptBecause::NotProvisioned), "{swept:?}");
    drop(reader);
    db.drop().await;
}
