//! The operator's lever: ForceRelease fences the current holder out.

use anyhow::Result;
use uuid::Uuid;

use crate::client::admin::ForceRelease;
use crate::client::{Publish, RefusalReason, Release, Renew};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired};

pub(crate) const FORCE_RELEASE: Check = Check {
    name: "force_release_fences_holder",
    behaviour: "an operator force-releases a key another session holds; the holder then publishes, renews and releases",
    document: "contract: Procedures (fence_admin.ForceRelease), Operator commands are idempotent by operation id",
    expected: "Fenced with a higher generation; the holder's publish Superseded, renew Lost, release NotHolder",
    run: |ctx| Box::pin(force_release(ctx)),
};

async fn force_release(ctx: &Context) -> Result<Verdict> {
    if !ctx.engine.operator {
        return Ok(Verdict::skipped(
            "this login may not run fence_admin.ForceRelease (it needs fence_operator or fence_admin rights)",
        ));
    }
    let [holder, operator]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&holder, "force-release").await?;
    let mut lease = acquired(holder.acquire(&key, LONG).await?)?;
    let fenced = operator.admin().force_release(&key).await?;
    let publish = holder.publish(&lease, Uuid::new_v4(), "after the operator").await?;
    let renew = holder.renew(&mut lease).await?;
    let release = holder.release(&lease).await?;
    Ok(Verdict::judge(
        matches!(fenced, ForceRelease::Fenced { generation } if generation > lease.generation())
            && publish == Publish::Refused(RefusalReason::Superseded)
            && renew == Renew::Lost
            && release == Release::NotHolder,
        format!(
            "ForceRelease {fenced:?} over generation {}; holder's publish {publish:?}, renew {renew:?}, release {release:?}",
            lease.generation()
        ),
    ))
}
