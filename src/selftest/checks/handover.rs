//! DESIGN semantics 1 and 2: a holder whose lease expired and was taken
//! over can neither publish nor touch its successor's lease.

use anyhow::Result;
use uuid::Uuid;

use crate::client::{Publication, Publish, RefusalReason, Release, Renew};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, SHORT, acquired, state, wait_until_expired};

pub(crate) const SUPERSEDED_PUBLISH: Check = Check {
    name: "handover",
    behaviour: "A's lease expires, B acquires, A publishes late, B publishes: A's write is refused and B's payload stands",
    document: "DESIGN semantics 1; contract: Refusals of a publish",
    expected: "A's publish Superseded; B's Published; the row holds B's generation and payload",
    run: |ctx| Box::pin(superseded_publish(ctx)),
};

async fn superseded_publish(ctx: &Context) -> Result<Verdict> {
    let [a, b]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&a, "handover").await?;
    let old = acquired(a.acquire(&key, SHORT).await?)?;
    wait_until_expired(&b, &key).await?;
    let new = acquired(b.acquire(&key, LONG).await?)?;
    let from_b = ctx.keys.payload("from B");
    let late = a.publish(&old, Uuid::new_v4(), &ctx.keys.payload("from A")).await?;
    let own = b.publish(&new, Uuid::new_v4(), &from_b).await?;
    let row = b.read_publication(&key).await?;
    let _ = b.release(&new).await;
    let stands = matches!(&row, Publication::Found { generation, payload, .. }
        if *generation == new.generation() && *payload == from_b);
    Ok(Verdict::judge(
        late == Publish::Refused(RefusalReason::Superseded) && own == Publish::Published && stands,
        format!(
            "A (generation {}) {late:?}; B (generation {}) {own:?}; row: {}",
            old.generation(),
            new.generation(),
            describe(&row)
        ),
    ))
}

pub(crate) const LATE_CALLS: Check = Check {
    name: "late_release_and_renew",
    behaviour: "after B took over A's expired lease, A's release and renew change nothing of B's",
    document: "DESIGN semantics 2; contract: Procedures (Release, Renew)",
    expected: "A's release NotHolder, renew Lost; B's lease unchanged and B still publishes",
    run: |ctx| Box::pin(late_calls(ctx)),
};

async fn late_calls(ctx: &Context) -> Result<Verdict> {
    let [a, b]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&a, "late-calls").await?;
    let mut old = acquired(a.acquire(&key, SHORT).await?)?;
    wait_until_expired(&b, &key).await?;
    let new = acquired(b.acquire(&key, LONG).await?)?;
    let before = state(&b, &key).await?;
    let release = a.release(&old).await?;
    let renew = a.renew(&mut old).await?;
    let after = state(&b, &key).await?;
    let own = b.publish(&new, Uuid::new_v4(), &ctx.keys.payload("from B")).await?;
    let _ = b.release(&new).await;
    let unchanged =
        (before.generation, before.is_held, before.lease_until) == (after.generation, after.is_held, after.lease_until);
    Ok(Verdict::judge(
        release == Release::NotHolder && renew == Renew::Lost && unchanged && own == Publish::Published,
        format!(
            "A's release {release:?}, renew {renew:?}; B's lease {} (generation {} held {} → generation {} held {}); B's publish {own:?}",
            if unchanged { "unchanged" } else { "CHANGED" },
            before.generation,
            before.is_held,
            after.generation,
            after.is_held
        ),
    ))
}

/// A publication in a few words.
pub(crate) fn describe(row: &Publication) -> String {
    match row {
        Publication::Found {
            generation, payload, ..
        } => format!("generation {generation} payload {payload:?}"),
        other => format!("{other:?}"),
    }
}

/// Whether `row` holds a publish of `generation`: the key is reused run
/// after run, so what an earlier run published may stand under it.
pub(crate) fn published_at(row: &Publication, generation: i64) -> bool {
    matches!(row, Publication::Found { generation: g, .. } if *g == generation)
}
