//! DESIGN semantics 6: the generation only ever rises.

use anyhow::Result;

use crate::client::{Provision, Release};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired, state};

pub(crate) const CHECK: Check = Check {
    name: "generation_rises",
    behaviour: "release, acquire again and provision again: the generation never goes back",
    document: "DESIGN semantics 6; contract: Procedures (Provision never resets a generation)",
    expected: "Released; the next acquisition's generation is higher; Provision answers Exists and keeps it \
               (redeploys are not run by the selftest)",
    run: |ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "generation").await?;
    let first = acquired(a.acquire(&key, LONG).await?)?;
    let release = a.release(&first).await?;
    let second = acquired(a.acquire(&key, LONG).await?)?;
    let provision = a.provision(&key).await?;
    let after = state(&a, &key).await?;
    let _ = a.release(&second).await;
    Ok(Verdict::judge(
        release == Release::Released
            && second.generation() > first.generation()
            && provision == Provision::Exists
            && after.generation == second.generation(),
        format!(
            "generation {} → release {release:?} → generation {}; Provision {provision:?}; row generation {}",
            first.generation(),
            second.generation(),
            after.generation
        ),
    ))
}
