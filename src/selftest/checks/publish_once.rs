//! DESIGN semantics 4 and 5: one publish per generation, and a replay of an
//! operation id answered from its record without writing again.

use anyhow::Result;
use uuid::Uuid;

use super::handover::describe;
use crate::client::{OperationOutcome, Publication, Publish, RefusalReason};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired};

pub(crate) const ONE_PER_GENERATION: Check = Check {
    name: "one_publish_per_generation",
    behaviour: "two publishes under one generation with different operation ids",
    document: "DESIGN semantics 4; contract: Refusals of a publish",
    expected: "the first Published, the second GenerationAlreadyPublished; the first payload stands",
    run: |ctx| Box::pin(one_per_generation(ctx)),
};

async fn one_per_generation(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "one-per-generation").await?;
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let first_payload = ctx.keys.payload("first");
    let first = a.publish(&lease, Uuid::new_v4(), &first_payload).await?;
    // An error is an answer here too: the contract names a refusal.
    let second = a.publish(&lease, Uuid::new_v4(), &ctx.keys.payload("second")).await;
    let row = a.read_publication(&key).await?;
    let _ = a.release(&lease).await;
    Ok(Verdict::judge(
        first == Publish::Published
            && matches!(second, Ok(Publish::Refused(RefusalReason::GenerationAlreadyPublished)))
            && matches!(&row, Publication::Found { payload, generation, .. }
                if *payload == first_payload && *generation == lease.generation()),
        format!(
            "first {first:?}, second {}; row: {}",
            match &second {
                Ok(answer) => format!("{answer:?}"),
                Err(e) => format!("error: {e}"),
            },
            describe(&row)
        ),
    ))
}

pub(crate) const REPLAY: Check = Check {
    name: "replayed_operation_id",
    behaviour: "a publish replayed with the same operation id from another session, carrying another payload",
    document: "DESIGN semantics 5; contract: Procedures (Publish, GetOutcome)",
    expected: "the replay AlreadyPublished; payload and publish time unchanged; GetOutcome names the key and generation",
    run: |ctx| Box::pin(replay(ctx)),
};

async fn replay(ctx: &Context) -> Result<Verdict> {
    let [a, other]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&a, "replay").await?;
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let operation = Uuid::new_v4();
    let first = a.publish(&lease, operation, &ctx.keys.payload("payload")).await?;
    let before = a.read_publication(&key).await?;
    let again = other.publish(&lease, operation, &ctx.keys.payload("changed")).await?;
    let after = a.read_publication(&key).await?;
    let outcome = other.outcome(operation).await?;
    let _ = a.release(&lease).await;
    let recorded = matches!(&outcome, OperationOutcome::Published { resource_key, generation, .. }
        if *resource_key == key && *generation == lease.generation());
    Ok(Verdict::judge(
        first == Publish::Published && again == Publish::AlreadyPublished && before == after && recorded,
        format!(
            "first {first:?}, replay {again:?}; row {} the replay; GetOutcome {}",
            if before == after { "unchanged by" } else { "CHANGED by" },
            if recorded {
                "names the key and generation"
            } else {
                "does not name them"
            }
        ),
    ))
}
