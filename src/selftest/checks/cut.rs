//! A connection cut around a publish's commit, settled by its operation id
//! from another session: before the commit nothing happened and the replay
//! publishes; after it the record answers and the replay writes nothing.

use anyhow::Result;
use uuid::Uuid;

use super::handover::describe;
use crate::client::{OperationOutcome, Publication, Publish, Release};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired};
use crate::selftest::session::PUBLISH;

pub(crate) const CHECK: Check = Check {
    name: "cut_around_commit",
    behaviour: "a publish's connection is cut before its commit, and another after it; each is settled by \
                its operation id from another session",
    document: "DESIGN (settle by operation id); contract: Inside your own transaction (an outcome takes \
               effect only when your transaction commits), Procedures (GetOutcome)",
    expected: "cut before the commit: GetOutcome Unknown, the replay Published once; cut after it: GetOutcome \
               Published, the replay AlreadyPublished, the payload written once",
    run: |ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "cut").await?;

    // Cut before the commit: the publish ran inside a transaction whose
    // connection then closed, so the server rolls it back.
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let before_commit = Uuid::new_v4();
    let mut doomed = ctx.session().await?;
    doomed.batch("BEGIN TRANSACTION;").await?;
    let provisional = doomed
        .call(
            PUBLISH,
            &[
                &key.as_str(),
                &lease.owner(),
                &lease.generation(),
                &before_commit,
                &"cut before commit",
            ],
        )
        .await?
        .outcome();
    drop(doomed);
    let unknown = a.outcome(before_commit).await?;
    let replayed = a.publish(&lease, before_commit, "cut before commit").await?;
    let release = a.release(&lease).await?;

    // Cut after the commit: the reply was read by nobody that settles it.
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let after_commit = Uuid::new_v4();
    let mut committed = ctx.session().await?;
    committed.batch("BEGIN TRANSACTION;").await?;
    let first = committed
        .call(
            PUBLISH,
            &[
                &key.as_str(),
                &lease.owner(),
                &lease.generation(),
                &after_commit,
                &"cut after commit",
            ],
        )
        .await?
        .outcome();
    committed.batch("COMMIT TRANSACTION;").await?;
    drop(committed);
    let settled = a.outcome(after_commit).await?;
    let again = a.publish(&lease, after_commit, "a different payload").await?;
    let row = a.read_publication(&key).await?;
    let _ = a.release(&lease).await;

    let before_held = provisional == "Published"
        && unknown == OperationOutcome::Unknown
        && replayed == Publish::Published
        && release == Release::Released;
    let after_held = first == "Published"
        && matches!(&settled, OperationOutcome::Published { generation, .. } if *generation == lease.generation())
        && again == Publish::AlreadyPublished
        && matches!(&row, Publication::Found { payload, generation, .. }
            if payload == "cut after commit" && *generation == lease.generation());
    Ok(Verdict::judge(
        before_held && after_held,
        format!(
            "before the commit: inside the transaction {provisional}, then GetOutcome {}, replay {replayed:?}; \
             after it: {first}, then GetOutcome {}, replay {again:?}, row {}",
            outcome_name(&unknown),
            outcome_name(&settled),
            describe(&row)
        ),
    ))
}

fn outcome_name(outcome: &OperationOutcome) -> String {
    match outcome {
        OperationOutcome::Published { generation, .. } => format!("Published (generation {generation})"),
        other => format!("{other:?}"),
    }
}
