//! A lease is given back when the future holding it is dropped, also after
//! the work finished: during `run_fenced`'s publish or its closing release,
//! and during `LeaseGuard::release`. The call in flight is made to hang at a
//! proxy, so the drop lands in the middle of it. The tests share one
//! database: each works on keys of its own.

use crate::support;

use std::time::Duration;

use fencepost::Client;
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, worker};
use support::proxy::{Cut, Proxy};
use tokio::time::Instant;

/// Long enough that a lease left behind is still held when the test looks.
const LEASE: Duration = Duration::from_secs(60);

struct Setup {
    db: TestDatabase,
    proxy: Proxy,
    client: Client,
    observer: Client,
}

async fn setup(test: &str) -> Option<Setup> {
    let db = TestDatabase::shared(test).await?;
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (through, direct) = (proxy.ado(&db.ado()), db.ado());
    let (client, observer) = tokio::join!(worker(&through), worker(&direct));
    Some(Setup {
        db,
        proxy,
        client,
        observer,
    })
}

/// Runs `call` until its request has reached the proxy, which swallows it,
/// then drops the future in the middle of that call.
async fn drop_once_hung<T: std::fmt::Debug>(proxy: &Proxy, call: impl std::future::Future<Output = T>) {
    let hung = async {
        let give_up = Instant::now() + Duration::from_secs(10);
        while proxy.cuts() == 0 {
            assert!(Instant::now() < give_up, "the call never went out");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        ended = call => panic!("the call ended although its request hangs: {ended:?}"),
        () = hung => {}
    }
}

/// Asserts that the lease on `key` is given back within the client's release
/// timeout (5 s), plus a little for the new connection.
async fn assert_released_soon(observer: &Client, key: &str) {
    let give_up = Instant::now() + Duration::from_secs(7);
    loop {
        let (_, held, _, _) = state(observer, key).await;
        if !held {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "the dropped future left the lease on {key} held"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_run_dropped_during_its_publish_releases_the_lease() {
    let Some(s) = setup("a_run_dropped_during_its_publish_releases_the_lease").await else {
        return;
    };
    let key = provisioned(&s.client, "dropped-publish").await;
    let run = s.client.run_fenced(&key, LEASE, |_| async {
        // The work's last act: the next request, its publish, never arrives.
        s.proxy.cut_next(Cut::Hang);
        Ok::<_, &str>("result".to_string())
    });
    drop_once_hung(&s.proxy, run).await;
    assert_released_soon(&s.observer, &key).await;
    drop((s.client, s.observer));
    s.db.drop().await;
}

#[tokio::test]
async fn a_run_dropped_during_its_closing_release_releases_the_lease() {
    let Some(s) = setup("a_run_dropped_during_its_closing_release_releases_the_lease").await else {
        return;
    };
    let key = provisioned(&s.client, "dropped-release").await;
    let run = s.client.run_fenced(&key, LEASE, |_| async {
        // A failed work publishes nothing: the next request is the release.
        s.proxy.cut_next(Cut::Hang);
        Err::<String, _>("the work failed")
    });
    drop_once_hung(&s.proxy, run).await;
    assert_released_soon(&s.observer, &key).await;
    drop((s.client, s.observer));
    s.db.drop().await;
}

#[tokio::test]
async fn a_guard_release_dropped_mid_call_still_releases_the_lease() {
    let Some(s) = setup("a_guard_release_dropped_mid_call_still_releases_the_lease").await else {
        return;
    };
    let key = provisioned(&s.client, "dropped-guard-release").await;
    let guard = s.client.guard(acquired(s.client.acquire(&key, LEASE).await.unwrap()));
    s.proxy.cut_next(Cut::Hang);
    drop_once_hung(&s.proxy, guard.release()).await;
    assert_released_soon(&s.observer, &key).await;
    drop((s.client, s.observer));
    s.db.drop().await;
}
