//! A publish that runs out of time while it waits for the fence row is
//! stopped on the server by the Attention its time-out sends, so it never
//! commits later.

use std::time::Duration;

use anyhow::Result;
use uuid::Uuid;

use crate::client::{Error, OperationOutcome, Publish};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired};
use crate::selftest::waiting::{NOT_VISIBLE, Queued, holder_watched};

/// The publishing client's call time-out: well inside the procedure's own 5 s bound.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) const CHECK: Check = Check {
    name: "attention_stops_waiting_publish",
    behaviour: "S1 holds the fence row in its open transaction; a client with a 2 s call time-out publishes \
                under the live lease and is seen waiting behind S1 before its time-out; S1 commits; the holder \
                publishes again",
    document: "engines.md Attention row; B14; MS-TDS 2.2.1.7 (Attention)",
    expected: "the timed-out publish reports OutcomeUnknown; after S1's commit GetOutcome of its operation id is \
               Unknown and the holder's next publish is Published (the stopped one never landed)",
    run: |ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &Context) -> Result<Verdict> {
    if ctx.engine.babelfish {
        return Ok(Verdict::skipped(
            "Babelfish 4.2 acknowledges a TDS Attention only after the running request ends, so the publish \
             would still wait on the row lock and commit after S1 (the code follows SQL Server, which stops it)",
        ));
    }
    let a = ctx.client().await?;
    let hurried = ctx
        .client_with(|c| {
            c.call_timeout(CALL_TIMEOUT);
        })
        .await?;
    let key = ctx.key(&a, "attention").await?;
    // The hurried client's first call compiles nothing in its time budget.
    hurried.inspect(&key).await?;
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let Some((mut holder, holder_spid, mut watcher)) = holder_watched(ctx).await? else {
        return Ok(Verdict::skipped(NOT_VISIBLE));
    };
    let held = holder.hold(&lease).await?;
    let stopped = Uuid::new_v4();
    // The publish runs while the watcher sees it wait behind S1: a publish
    // that answered, or was never seen waiting, before its time-out proves
    // nothing about the Attention.
    let (sent_lease, payload) = (lease.clone(), ctx.keys.payload("should never land"));
    let publish = tokio::spawn(async move { hurried.publish(&sent_lease, stopped, &payload).await });
    let queued = watcher.any_behind(holder_spid, || publish.is_finished()).await?;
    let timed_out = publish.await?;
    holder.batch("COMMIT TRANSACTION;").await?;
    let next = a
        .publish(&lease, Uuid::new_v4(), &ctx.keys.payload("after the holder's commit"))
        .await?;
    let outcome = a.outcome(stopped).await?;
    let _ = a.release(&lease).await;
    Ok(Verdict::judge(
        held == "Holding"
            && queued == Queued::Waiting
            && matches!(timed_out, Err(Error::OutcomeUnknown { .. }))
            && outcome == OperationOutcome::Unknown
            && next == Publish::Published,
        format!(
            "S1 AssertHolder {held}; the publish {}; then it {}; GetOutcome {}; the holder's next publish {next:?}",
            queued.word(),
            match &timed_out {
                Ok(p) => format!("{p:?}"),
                Err(Error::OutcomeUnknown { .. }) => "OutcomeUnknown".to_string(),
                Err(e) => format!("error: {e}"),
            },
            match outcome {
                OperationOutcome::Unknown => "Unknown".to_string(),
                _ => "Published (it landed after its time-out)".to_string(),
            }
        ),
    ))
}
