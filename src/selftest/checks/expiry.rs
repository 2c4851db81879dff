//! DESIGN semantics 3: an expired lease is never revived, even when nobody
//! took over.

use anyhow::Result;
use uuid::Uuid;

use super::handover::{describe, published_at};
use crate::client::{Publish, RefusalReason, Renew};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, SHORT, acquired, state, wait_until_expired};

pub(crate) const CHECK: Check = Check {
    name: "publish_after_expiry",
    behaviour: "a publish and a renew after the lease expired, with no successor",
    document: "DESIGN semantics 3; contract: Procedures (Renew: an expired lease is never revived)",
    expected: "publish Expired, renew Lost; the row stays unheld at the same generation with nothing published \
               under it",
    run: |ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "expiry").await?;
    let mut lease = acquired(a.acquire(&key, SHORT).await?)?;
    wait_until_expired(&a, &key).await?;
    let publish = a.publish(&lease, Uuid::new_v4(), &ctx.keys.payload("late")).await?;
    let renew = a.renew(&mut lease).await?;
    let after = state(&a, &key).await?;
    let row = a.read_publication(&key).await?;
    Ok(Verdict::judge(
        publish == Publish::Refused(RefusalReason::Expired)
            && renew == Renew::Lost
            && !after.is_held
            && after.generation == lease.generation()
            && !published_at(&row, lease.generation()),
        format!(
            "publish {publish:?}, renew {renew:?}; row generation {} held {}; publication {}",
            after.generation,
            after.is_held,
            describe(&row)
        ),
    ))
}
