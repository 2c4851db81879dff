//! The operator's lever: ForceRelease fences the current holder out.

use anyhow::Result;
use uuid::Uuid;

use crate::client::admin::ForceRelease;
use crate::client::{Publish, RefusalReason, Release, Renew};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired};

pub(crate) const FORCE_RELEASE: Check = Check {
    name: "force_release_fences_holder",
    behaviour: "an operator force-releases a key another session holds; the holder then publishes, renews and \
                releases, acquires again, and the operator replays the force-release with the same operation id",
    document: "contract: Procedures (fence_admin.ForceRelease), Operator commands are idempotent by operation id",
    expected: "Fenced with a higher generation; the holder's publish Superseded, renew Lost, release NotHolder; \
               the replay answers the first answer (Fenced, the same generation) and the new lease still renews",
    run: |ctx| Box::pin(force_release(ctx)),
};

async fn force_release(ctx: &Context) -> Result<Verdict> {
    if !ctx.engine.may_force_release {
        return Ok(Verdict::skipped(
            "this login may not run fence_admin.ForceRelease (it needs fence_operator or fence_admin rights)",
        ));
    }
    let [holder, operator]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&holder, "force-release").await?;
    let mut lease = acquired(holder.acquire(&key, LONG).await?)?;
    let operation = Uuid::new_v4();
    let fenced = operator.admin().force_release_as(&key, operation).await?;
    let publish = holder
        .publish(&lease, Uuid::new_v4(), &ctx.keys.payload("after the operator"))
        .await?;
    let renew = holder.renew(&mut lease).await?;
    let release = holder.release(&lease).await?;
    // A retry of the same command after the key moved on must answer what
    // the first call answered and fence no one: the new holder keeps its lease.
    let mut again = acquired(holder.acquire(&key, LONG).await?)?;
    let replay = operator.admin().force_release_as(&key, operation).await?;
    let renew_again = holder.renew(&mut again).await?;
    let _ = holder.release(&again).await;
    Ok(Verdict::judge(
        matches!(fenced, ForceRelease::Fenced { generation } if generation > lease.generation())
            && publish == Publish::Refused(RefusalReason::Superseded)
            && renew == Renew::Lost
            && release == Release::NotHolder
            && replay == fenced
            && matches!(renew_again, Renew::Renewed { .. }),
        format!(
            "ForceRelease {fenced:?} over generation {}; holder's publish {publish:?}, renew {renew:?}, release \
             {release:?}; after a new acquire (generation {}) the replay answered {replay:?} and the new lease's \
             renew {renew_again:?}",
            lease.generation(),
            again.generation()
        ),
    ))
}
