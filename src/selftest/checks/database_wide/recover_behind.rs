//! Recover behind a caller's open transaction that holds a fence row: it
//! gives up within its bound and changes nothing, the calls on other keys
//! are served while it waits, and behind a transaction that then ends it
//! recovers, without a deadlock for the caller that goes on to a second key.

use std::time::Instant;

use anyhow::Result;
use tiberius::ToSql;
use uuid::Uuid;

use super::{EARLIEST, LATEST, RECOVER, gave_up};
use crate::client::Lease;
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired, state};
use crate::selftest::session::ASSERT_HOLDER;
use crate::selftest::waiting::{NOT_VISIBLE, Queued, Sent, holder_watched};

const RENEW: &str = "EXEC fence_api.Renew @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @LeaseSeconds = @P4";

pub(crate) const CHECK: Check = Check {
    name: "recover_behind_open_transaction",
    behaviour: "S1 holds a fence row in its open transaction (AssertHolder); S2's Recover is seen waiting behind \
                S1, and S3 renews another key; then S2 recovers again, seen waiting behind S1, while S1 goes on \
                to the other key and commits",
    document: "engines.md row 2; B6, B7; contract: Recover, Services and operators at once",
    expected: "S2's first Recover gives up after about 5 s (50129), its transaction gone, the other key's \
               generation unchanged; S3's Renew answers Renewed while S2 still waits; S1's AssertHolder of the \
               other key answers Holding (no 1205); S2's second Recover answers Recovered once S1 commits",
    run: |ctx| Box::pin(run(ctx)),
};

fn renew_args(lease: &Lease) -> Vec<Box<dyn ToSql>> {
    vec![
        Box::new(lease.key().to_string()),
        Box::new(lease.owner()),
        Box::new(lease.generation()),
        Box::new(30i32),
    ]
}

async fn run(ctx: &Context) -> Result<Verdict> {
    let babelfish = ctx.engine.babelfish;
    let Some((mut holder, holder_spid, mut watcher)) = holder_watched(ctx).await? else {
        return Ok(Verdict::skipped(NOT_VISIBLE));
    };
    let client = ctx.client().await?;
    // The other key first: a recovery that locks row by row (Babelfish)
    // reaches it before the held one, which is the harder case for S3.
    let other_key = ctx.key(&client, "recover-other").await?;
    let held_key = ctx.key(&client, "recover-held").await?;
    let other = acquired(client.acquire(&other_key, LONG).await?)?;
    let held_lease = acquired(client.acquire(&held_key, LONG).await?)?;
    let held = holder.hold(&held_lease).await?;
    let mut seen = vec![format!("S1 AssertHolder {held}")];

    // The recovery behind S1, and a renewal of another key while it waits.
    let started = Instant::now();
    let recover = Sent::send(ctx.session().await?, RECOVER, vec![Box::new(Uuid::new_v4())]).await?;
    let queued = watcher.queue(&recover, holder_spid).await?;
    seen.push(format!("S2's Recover {}", queued.word()));
    let renew = Sent::send(ctx.session().await?, RENEW, renew_args(&other)).await?;
    let renew_sent = Instant::now();
    let (first, let_go) = {
        let call = recover.answer_at();
        tokio::pin!(call);
        // A recovery that waits past any bound is let go by S1's rollback,
        // so the check ends in time and says so.
        tokio::select! {
            answer = &mut call => (answer?, false),
            () = tokio::time::sleep_until((started + LATEST).into()) => {
                holder.rollback().await;
                (call.await?, true)
            }
        }
    };
    let (mut operator, first, recovered_at) = first;
    let waited = recovered_at - started;
    let trancount = operator.int("SELECT @@TRANCOUNT").await?;
    seen.push(format!(
        "S2 answered {} after {:.1} s{}; @@TRANCOUNT {}",
        first.outcome(),
        waited.as_secs_f64(),
        if let_go {
            format!(
                ", only once S1 rolled back to let it go: it was still waiting after {} s",
                LATEST.as_secs()
            )
        } else {
            String::new()
        },
        trancount.map_or("NULL".to_string(), |n| n.to_string())
    ));
    let renewed = match tokio::time::timeout(LATEST, renew.answer_at()).await {
        Ok(answer) => Some(answer?),
        Err(_) => None,
    };
    let (renew_outcome, renewed_first) = match &renewed {
        Some((_, answer, at)) => {
            let first = *at < recovered_at;
            seen.push(format!(
                "S3's Renew of the other key {} after {:.1} s, {}",
                answer.outcome(),
                (*at - renew_sent).as_secs_f64(),
                if first {
                    "while S2 still waited"
                } else {
                    "after S2 answered"
                }
            ));
            (answer.outcome(), first)
        }
        None => {
            seen.push(format!(
                "S3's Renew of the other key still waiting {} s after S2 answered",
                LATEST.as_secs()
            ));
            ("no answer".to_string(), false)
        }
    };
    let generation = state(&client, &other_key).await?.generation;
    let unchanged = generation == other.generation();
    seen.push(format!(
        "the other key's generation {} ({})",
        generation,
        if unchanged { "unchanged" } else { "CHANGED" }
    ));

    // Behind a transaction that ends, the recovery recovers; S1 goes on to
    // the other key meanwhile.
    let mut second_key = "not run".to_string();
    let mut second_recovery = None;
    if !let_go {
        let recover = Sent::send(operator, RECOVER, vec![Box::new(Uuid::new_v4())]).await?;
        let queued = watcher.queue(&recover, holder_spid).await?;
        seen.push(format!("S2's second Recover {}", queued.word()));
        if babelfish {
            seen.push(
                "S1's AssertHolder of the other key not run: Babelfish ignores the table hint, so Recover locks \
                 row by row and S1 would wait for a row Recover holds (the engine ends one of the two)"
                    .to_string(),
            );
        } else if queued == Queued::Waiting {
            second_key = holder
                .call(ASSERT_HOLDER, &[&other.key(), &other.owner(), &other.generation()])
                .await?
                .outcome();
            seen.push(format!("S1's AssertHolder of the other key {second_key}"));
        }
        holder.batch("IF @@TRANCOUNT > 0 COMMIT TRANSACTION;").await?;
        let answer = match tokio::time::timeout(LATEST, recover.answer()).await {
            Ok(answer) => answer?.1.outcome(),
            Err(_) => format!("no answer {} s after S1 committed", LATEST.as_secs()),
        };
        seen.push(format!("S1 committed; S2 answered {answer}"));
        second_recovery = Some((queued, answer));
    }

    let first_held = queued == Queued::Waiting
        && gave_up(&first, babelfish, &[50129])
        && (EARLIEST..=LATEST).contains(&waited)
        && !let_go
        && trancount == Some(0)
        && renew_outcome == "Renewed"
        // Babelfish locks row by row: S3 waits for the row Recover took
        // until Recover gives up; SQL Server lets it through between tries.
        && (babelfish || renewed_first)
        && unchanged;
    let second_held = matches!(&second_recovery, Some((Queued::Waiting, answer)) if answer == "Recovered")
        && (babelfish || second_key == "Holding");
    let verdict = Verdict::judge(held == "Holding" && first_held && second_held, seen.join("; "));
    Ok(if babelfish {
        verdict.expecting(
            "Babelfish: S2's first Recover ends after about 5 s in the engine's lock-timeout error, its \
             transaction gone, the other key's generation unchanged; S3's Renew answers Renewed (once S2 gives \
             up, when S2 had already locked the other key's row: Babelfish ignores table hints and locks row by \
             row); S2's second Recover answers Recovered once S1 commits",
        )
    } else {
        verdict
    })
}
