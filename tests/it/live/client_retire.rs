//! `Admin::retire` (contract v1.6) when the connection breaks: the command
//! carries one operation id and, when its reply is lost, is replayed with it,
//! so it answers `Retired` with the key's generation (a retry without the id
//! would answer `NotProvisioned`, the key being gone). A key held by a lease
//! is refused with 50131, which the client reports as the server's error.
//! The test has a database of its own: a retirement raises the starting
//! generation of every key provisioned afterwards.

use crate::support;

use std::time::Duration;

use fencepost::client::admin::{PruneOutcomes, RETIRE_REFUSED_HELD, Retire};
use fencepost::client::{Provision, Release};
use support::TestDatabase;
use support::lease::{acquired, provisioned, worker};
use support::proxy::{Cut, Proxy};

const CUTS: [Cut; 3] = [Cut::BeforeRequest, Cut::BeforeReply, Cut::MidReply];
const LEASE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_retirement_cut_anywhere_is_replayed_with_its_operation_id_and_answers_retired() {
    const TEST: &str = "a_retirement_cut_anywhere_is_replayed_with_its_operation_id_and_answers_retired";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let client = worker(&proxy.ado(&db.ado())).await;
    let admin = client.admin();
    for cut in CUTS {
        let key = provisioned(&client, "retire-cut").await;
        let lease = acquired(client.acquire(&key, LEASE).await.unwrap());
        let refused = admin.retire(&key).await.unwrap_err();
        assert_eq!(refused.server_number(), Some(RETIRE_REFUSED_HELD), "{refused:?}");
        assert_eq!(client.release(&lease).await.unwrap(), Release::Released);

        proxy.cut_next(cut);
        let retired = admin.retire(&key).await;
        assert!(!proxy.cut_pending(), "{cut:?}: the cut never happened");
        assert_eq!(
            retired.unwrap(),
            Retire::Retired {
                generation: lease.generation()
            },
            "{cut:?}"
        );
        // Provisioned again, the key starts where it was retired.
        assert_eq!(client.provision(&key).await.unwrap(), Provision::Created);
        let next = acquired(client.acquire(&key, LEASE).await.unwrap());
        assert_eq!(next.generation(), lease.generation() + 1, "{cut:?}");
        assert_eq!(client.release(&next).await.unwrap(), Release::Released);
    }
    let pruned = admin.prune_outcomes(1).await.unwrap();
    assert!(
        matches!(
            pruned,
            PruneOutcomes::Pruned {
                publishes: 0,
                commands: 0,
                ..
            }
        ),
        "{pruned:?}"
    );
    drop(client);
    db.drop().await;
}
