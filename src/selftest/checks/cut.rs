//! A connection cut around a publish's commit, settled by its operation id
//! from another session: before the commit nothing happened and the replay
//! publishes; after it the record answers and the replay writes nothing.

use std::time::Duration;

use anyhow::Result;
use uuid::Uuid;

use super::handover::describe;
use crate::client::{OperationOutcome, Publication, Publish, Release};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired};
use crate::selftest::session::PUBLISH;
use crate::selftest::waiting::{Queued, Sent, Watcher};

const GET_OUTCOME: &str = "EXEC fence_api.GetOutcome @OperationId = @P1";

/// How long GetOutcome may take to answer once the transaction it waits
/// for is cut: the server rolls it back at once.
const ANSWER_BOUND: Duration = Duration::from_secs(10);

pub(crate) const CHECK: Check = Check {
    name: "cut_around_commit",
    behaviour: "a publish's connection is cut before its commit, another session asking its outcome while its \
                transaction is open; another publish's connection is cut after its commit; each is settled by its \
                operation id from another session",
    document: "DESIGN (settle by operation id); contract: Inside your own transaction (an outcome takes \
               effect only when your transaction commits), Procedures (GetOutcome)",
    expected: "cut before the commit: GetOutcome, asked while the transaction is open, never Published (it \
               answers Unknown from the last committed state, or waits for the transaction and answers Unknown \
               once it is cut), the replay Published once; cut after it: GetOutcome Published, the replay \
               AlreadyPublished, the payload written once",
    run: |ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "cut").await?;

    // Cut before the commit: the publish ran inside a transaction whose
    // connection then closed, so the server rolls it back. While it is still
    // open, another session asks for its outcome: a GetOutcome that read
    // the uncommitted record would answer Published for a publish that
    // never happens.
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let before_commit = Uuid::new_v4();
    let before_payload = ctx.keys.payload("cut before commit");
    let mut doomed = ctx.session().await?;
    let doomed_spid = doomed.spid().await?;
    doomed.batch("BEGIN TRANSACTION;").await?;
    let provisional = doomed
        .call(
            PUBLISH,
            &[
                &key.as_str(),
                &lease.owner(),
                &lease.generation(),
                &before_commit,
                &before_payload.as_str(),
            ],
        )
        .await?
        .outcome();
    let mut watcher = Watcher::open(ctx).await?;
    let asked = Sent::send(ctx.session().await?, GET_OUTCOME, vec![Box::new(before_commit)]).await?;
    // It answers at once from the last committed state (READ_COMMITTED_SNAPSHOT
    // on, Babelfish), or waits for the open transaction (off): either is
    // seen here, or it had the watcher's bound to answer from what it read.
    let while_open = watcher.queue(&asked, doomed_spid).await?;
    drop(doomed);
    let asked = match tokio::time::timeout(ANSWER_BOUND, asked.answer()).await {
        Ok(answer) => answer?.1.outcome(),
        Err(_) => format!("no answer {} s after the cut", ANSWER_BOUND.as_secs()),
    };
    let replayed = a.publish(&lease, before_commit, &before_payload).await?;
    let release = a.release(&lease).await?;

    // Cut after the commit: the reply was read by nobody that settles it.
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let after_commit = Uuid::new_v4();
    let after_payload = ctx.keys.payload("cut after commit");
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
                &after_payload.as_str(),
            ],
        )
        .await?
        .outcome();
    committed.batch("COMMIT TRANSACTION;").await?;
    drop(committed);
    let settled = a.outcome(after_commit).await?;
    let again = a
        .publish(&lease, after_commit, &ctx.keys.payload("a different payload"))
        .await?;
    let row = a.read_publication(&key).await?;
    let _ = a.release(&lease).await;

    let before_held = provisional == "Published"
        && asked == "Unknown"
        && replayed == Publish::Published
        && release == Release::Released;
    let after_held = first == "Published"
        && matches!(&settled, OperationOutcome::Published { generation, .. } if *generation == lease.generation())
        && again == Publish::AlreadyPublished
        && matches!(&row, Publication::Found { payload, generation, .. }
            if *payload == after_payload && *generation == lease.generation());
    Ok(Verdict::judge(
        before_held && after_held,
        format!(
            "before the commit: inside the transaction {provisional}; another session's GetOutcome, asked while \
             it was open, {} and answered {asked}; replay after the cut {replayed:?}; after the commit: {first}, \
             then GetOutcome {}, replay {again:?}, row {}",
            match while_open {
                Queued::Waiting => "waited for it",
                Queued::Answered => "answered while it was open",
                Queued::NotSeen => "neither answered nor was seen waiting while it was open",
            },
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
