//! Calls that overlap in time, each from a session of its own, released
//! together by a barrier: several acquisitions of one key, and a publish
//! racing an acquisition.

use std::sync::Arc;

use anyhow::Result;
use tokio::sync::Barrier;
use uuid::Uuid;

use super::handover::describe;
use crate::client::{Acquire, Publication, Publish, RefusalReason};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, SHORT, acquire_name, acquired, wait_until_expired};

/// How many sessions acquire at once.
const CONTENDERS: usize = 4;

pub(crate) const OVERLAPPING_ACQUIRES: Check = Check {
    name: "overlapping_acquisitions",
    behaviour: "four sessions acquire one free key at the same moment",
    document: "DESIGN (Acquire: one holder per generation); contract: Procedures (Acquire)",
    expected: "exactly one Acquired, every other Busy; no error",
    run: |ctx| Box::pin(overlapping(ctx)),
};

async fn overlapping(ctx: &Context) -> Result<Verdict> {
    let clients = ctx.clients(CONTENDERS).await?;
    let key = ctx.key(&clients[0], "overlap").await?;
    let start = Arc::new(Barrier::new(CONTENDERS));
    let tasks = clients.into_iter().map(|client| {
        let (start, key) = (start.clone(), key.clone());
        async move {
            start.wait().await;
            let answer = client.acquire(&key, LONG).await;
            (client, answer)
        }
    });
    let answers = futures_util::future::join_all(tasks).await;
    let mut words = Vec::new();
    let (mut acquired_count, mut busy) = (0, 0);
    for (client, answer) in &answers {
        match answer {
            Ok(Acquire::Acquired(lease)) => {
                acquired_count += 1;
                let _ = client.release(lease).await;
            }
            Ok(Acquire::Busy { .. }) => busy += 1,
            _ => {}
        }
        words.push(match answer {
            Ok(a) => acquire_name(a),
            Err(e) => format!("error: {e}"),
        });
    }
    Ok(Verdict::judge(
        acquired_count == 1 && busy == CONTENDERS - 1,
        words.join(", "),
    ))
}

pub(crate) const PUBLISH_RACES_ACQUIRE: Check = Check {
    name: "publish_racing_acquisition",
    behaviour: "a holder's publish and another session's acquisition sent at the same moment, \
                once while the lease is live and once after it expired",
    document: "DESIGN (a publish is a conditional update on the row the acquisition changes); contract: \
               A lease is judged when its row is locked",
    expected: "live: the publish Published and the acquisition Busy; expired: the acquisition Acquired and the \
               publish refused (Expired or Superseded), nothing of it published",
    run: |ctx| Box::pin(publish_races(ctx)),
};

async fn publish_races(ctx: &Context) -> Result<Verdict> {
    let [a, b]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    // Live lease: the publish must land and the acquisition find it held.
    let live_key = ctx.key(&a, "race-live").await?;
    let live = acquired(a.acquire(&live_key, LONG).await?)?;
    let (publish_live, acquire_live) = race(&a, &b, &live, &live_key).await;
    let _ = a.release(&live).await;
    // Expired lease: the acquisition takes over; the publish is refused.
    let dead_key = ctx.key(&a, "race-expired").await?;
    let dead = acquired(a.acquire(&dead_key, SHORT).await?)?;
    wait_until_expired(&b, &dead_key).await?;
    let (publish_dead, acquire_dead) = race(&a, &b, &dead, &dead_key).await;
    if let Ok(Acquire::Acquired(lease)) = &acquire_dead {
        let _ = b.release(lease).await;
    }
    let row = b.read_publication(&dead_key).await?;
    let live_held = matches!(publish_live, Ok(Publish::Published)) && matches!(acquire_live, Ok(Acquire::Busy { .. }));
    let dead_held = matches!(
        publish_dead,
        Ok(Publish::Refused(RefusalReason::Expired | RefusalReason::Superseded))
    ) && matches!(acquire_dead, Ok(Acquire::Acquired(_)))
        && row == Publication::NothingPublished;
    let word = |answer: &Result<Acquire, crate::client::Error>| match answer {
        Ok(a) => acquire_name(a),
        Err(e) => format!("error: {e}"),
    };
    Ok(Verdict::judge(
        live_held && dead_held,
        format!(
            "live: publish {:?}, acquisition {}; expired: publish {:?}, acquisition {}, row {}",
            publish_live.as_ref().map_err(ToString::to_string),
            word(&acquire_live),
            publish_dead.as_ref().map_err(ToString::to_string),
            word(&acquire_dead),
            describe(&row)
        ),
    ))
}

/// `a` publishes under `lease` while `b` acquires `key`, both let go by one barrier.
async fn race(
    a: &crate::Client,
    b: &crate::Client,
    lease: &crate::client::Lease,
    key: &str,
) -> (
    Result<Publish, crate::client::Error>,
    Result<Acquire, crate::client::Error>,
) {
    let start = Barrier::new(2);
    tokio::join!(
        async {
            start.wait().await;
            a.publish(lease, Uuid::new_v4(), "from the holder").await
        },
        async {
            start.wait().await;
            b.acquire(key, LONG).await
        }
    )
}
