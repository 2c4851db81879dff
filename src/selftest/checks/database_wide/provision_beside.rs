//! A first Provision beside a recovery: one sent while a recovery has not
//! committed waits for it and starts at its floor; one made inside a
//! caller's transaction that holds a fence row while a recovery waits for
//! that row ends as the contract says (the recovery's bound, or the engine
//! ends one side), never in a hang and never with a lost fence.

use std::time::Instant;

use anyhow::{Context as _, Result};
use uuid::Uuid;

use super::{LATEST, RECOVER, deadlock_victim, gave_up};
use crate::Client;
use crate::client::{Acquire, Inspection};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquire_name, acquired};
use crate::selftest::session::{Answer, Session};
use crate::selftest::waiting::{NOT_VISIBLE, Queued, Sent, Watcher, holder_watched};

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";

pub(crate) const CHECK: Check = Check {
    name: "provision_beside_recover",
    behaviour: "S2 recovers inside its own transaction and S3's first Provision of a key is seen waiting behind \
                it until S2 commits; then S1 holds a fence row in its open transaction, S2's Recover is seen \
                waiting behind S1, and S1 provisions a new key",
    document: "contract: Provision (a first provision waits for a running Recover), Provision outside your \
               transaction, Services and operators at once; B9",
    expected: "S3's Provision waits for S2, answers Created, and the key's first generation is above S2's floor; \
               then either S2 gives up (50127 or 50129) and S1's Provision answers Created in S1's transaction, \
               or the engine ends one side (S1's Provision 50127 or 1205, rolling S1's transaction back, and S2 \
               Recovered; or S2 1205), both within about 5 s; the fence stays whole either way (a recovery that \
               ran voided S1's lease; one that gave up changed nothing)",
    run: |ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &Context) -> Result<Verdict> {
    let Some((mut operator, operator_spid, mut watcher)) = holder_watched(ctx).await? else {
        return Ok(Verdict::skipped(NOT_VISIBLE));
    };
    let client = ctx.client().await?;
    let (during_held, mut seen) = during_recovery(ctx, &client, &mut watcher, &mut operator, operator_spid).await?;
    let (beside_held, beside_seen) = beside_recovery(ctx, &client, &mut watcher).await?;
    seen.extend(beside_seen);
    Ok(Verdict::judge(during_held && beside_held, seen.join("; ")))
}

/// S2 recovers in its own open transaction; S3's first Provision must wait
/// for it and start at its floor.
async fn during_recovery(
    ctx: &Context,
    client: &Client,
    watcher: &mut Watcher,
    operator: &mut Session,
    operator_spid: i32,
) -> Result<(bool, Vec<String>)> {
    operator.batch("BEGIN TRANSACTION;").await?;
    let recovered = operator.call(RECOVER, &[&Uuid::new_v4()]).await?;
    let Some(floor) = recovered.big("GenerationFloor") else {
        operator.rollback().await;
        return Ok((
            false,
            vec![format!(
                "S2's Recover in its transaction answered {}",
                recovered.outcome()
            )],
        ));
    };
    let key = ctx.keys.key("provision-during-recovery");
    let provision = Sent::send(ctx.session().await?, PROVISION, vec![Box::new(key.clone())]).await?;
    let queued = watcher.queue(&provision, operator_spid).await?;
    operator.batch("COMMIT TRANSACTION;").await?;
    let created = match tokio::time::timeout(LATEST, provision.answer()).await {
        Ok(answer) => answer?.1.outcome(),
        Err(_) => format!("no answer {} s after S2 committed", LATEST.as_secs()),
    };
    let first = client.acquire(&key, LONG).await?;
    let generation = match &first {
        Acquire::Acquired(lease) => Some(lease.generation()),
        _ => None,
    };
    let held = queued == Queued::Waiting && created == "Created" && generation.is_some_and(|g| g > floor);
    Ok((
        held,
        vec![format!(
            "S2 Recovered in its transaction (floor {floor}); S3's first Provision {}; S2 committed; S3 answered \
             {created}; its first Acquire {} ({})",
            queued.behind("S2"),
            acquire_name(&first),
            match generation {
                Some(g) if g > floor => "above the floor",
                Some(_) => "AT OR BELOW THE FLOOR: a generation issued before the recovery may be issued again",
                None => "no generation",
            }
        )],
    ))
}

/// S1 holds a fence row; S2's Recover waits for it; S1 provisions a new key.
async fn beside_recovery(ctx: &Context, client: &Client, watcher: &mut Watcher) -> Result<(bool, Vec<String>)> {
    let babelfish = ctx.engine.babelfish;
    let caller_key = ctx.key(client, "provision-caller-row").await?;
    let lease = acquired(client.acquire(&caller_key, LONG).await?)?;
    let mut caller = ctx.session().await?;
    let caller_spid = caller.spid().await?;
    let held = caller.hold(&lease).await?;
    let mut seen = vec![format!("S1 AssertHolder {held}")];
    let started = Instant::now();
    let recover = Sent::send(ctx.session().await?, RECOVER, vec![Box::new(Uuid::new_v4())]).await?;
    let queued = watcher.queue(&recover, caller_spid).await?;
    seen.push(format!("S2's Recover {}", queued.word()));
    let new_key = ctx.keys.key("provision-beside-recover");
    let provision = Sent::send(caller, PROVISION, vec![Box::new(new_key.clone())]).await?;
    // Both answer within the recovery's bound, or the check cuts them:
    // their sessions close, and the server rolls back what they began.
    let Ok((recovered, provided)) = tokio::time::timeout(LATEST, async {
        tokio::join!(recover.answer_at(), provision.answer_at())
    })
    .await
    else {
        seen.push(format!(
            "neither answered within {} s (a hang: the calls were cut, rolling both back)",
            LATEST.as_secs()
        ));
        return Ok((false, seen));
    };
    let (mut operator, recovered, recovered_at) = recovered?;
    let (mut caller, provided, provided_at) = provided?;
    let trancount = caller.int("SELECT @@TRANCOUNT").await?;
    seen.push(format!(
        "S1's Provision of a new key {} after {:.1} s, @@TRANCOUNT {}; S2 answered {} after {:.1} s",
        provided.outcome(),
        (provided_at - started).as_secs_f64(),
        trancount.map_or("NULL".to_string(), |n| n.to_string()),
        recovered.outcome(),
        (recovered_at - started).as_secs_f64(),
    ));
    let created = provided.outcome() == "Created";
    let committed = if created && trancount == Some(1) {
        caller.batch("COMMIT TRANSACTION;").await.is_ok()
    } else {
        caller.rollback().await;
        false
    };
    // The contract's outcomes: the recovery gives up and the caller goes
    // on; or the engine ends the caller's transaction and the recovery
    // runs; or it ends the recovery.
    let recovery_gave_up = gave_up(&recovered, babelfish, &[50127, 50129]) || deadlock_victim(&recovered);
    let caller_ended = matches!(&provided, Answer::Error { number: 50127, .. }) || deadlock_victim(&provided);
    let outcome = if recovery_gave_up && created && committed {
        Some(false)
    } else if caller_ended && trancount == Some(0) && recovered.outcome() == "Recovered" {
        Some(true)
    } else {
        None
    };
    // The fence after it: a recovery that ran voided S1's lease and the
    // key S1 did not create is not there; one that gave up changed nothing.
    let whole = match outcome {
        Some(recovery_ran) => {
            // AssertHolder runs only inside a transaction; rolled back at once.
            let asserted = operator.hold(&lease).await?;
            operator.rollback().await;
            let provisioned = !matches!(
                client.inspect(&new_key).await.context("inspecting the new key")?,
                Inspection::NotProvisioned
            );
            seen.push(format!(
                "then S1's lease: AssertHolder {asserted}; the new key {}",
                if provisioned { "provisioned" } else { "not provisioned" }
            ));
            if recovery_ran {
                asserted != "Holding" && !provisioned
            } else {
                asserted == "Holding" && provisioned
            }
        }
        None => {
            seen.push("an outcome the contract does not list".to_string());
            false
        }
    };
    Ok((held == "Holding" && queued == Queued::Waiting && whole, seen))
}
