//! Calls that overlap in time, each from a session of its own, forced to
//! interleave: S1 holds the fence row in an open transaction, the calls are
//! seen queued behind it (see `waiting`), and only then does S1 let go. So
//! every call has made whatever decision it makes before it takes the row,
//! and the one that gets the row first is the one queued first: several
//! acquisitions of one key, and a publish racing an acquisition.
//!
//! S1 lets go by rolling back, which leaves the row as it was. Had it
//! committed a change to the row, PostgreSQL (under Babelfish) would send
//! each waiter on to the row's new version, where they meet again in no
//! set order; after a rollback they take the row in the order they queued,
//! as SQL Server grants its lock queue.

use std::time::Duration;

use anyhow::{Result, bail};
use tiberius::ToSql;
use time::OffsetDateTime;
use uuid::Uuid;

use super::handover::{describe, published_at};
use crate::client::{Lease, Publication};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired, state};
use crate::selftest::session::{ACQUIRE, Answer, PUBLISH, RELEASE, Session};
use crate::selftest::waiting::{NOT_VISIBLE, Queued, Sent, holder_watched};

/// How many sessions acquire at once.
const CONTENDERS: usize = 4;

/// The lease the contenders ask for, in seconds.
const LEASE_SECONDS: i32 = 30;

/// A lease that ends while the racing calls wait behind S1: long enough to
/// send both and see them queued before it ends, short enough that S1 lets
/// go within the procedures' 5 s bound on their wait.
const ENDING: Duration = Duration::from_secs(3);

pub(crate) const OVERLAPPING_ACQUIRES: Check = Check {
    name: "overlapping_acquisitions",
    behaviour: "S1 holds a free key's row in an open transaction (an acquisition of its own, rolled back at the \
                end); four sessions acquire the key and are seen queued behind S1; S1 rolls back",
    document: "DESIGN (Acquire: one holder per generation); contract: Procedures (Acquire), A lease is judged when \
               its row is locked",
    expected: "each acquisition waits behind S1; then exactly one Acquired, with the next generation, and every \
               other Busy; no error",
    run: |ctx| Box::pin(overlapping(ctx)),
};

async fn overlapping(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "overlap").await?;
    let before = state(&a, &key).await?;
    let Some((mut holder, holder_spid, mut watcher)) = holder_watched(ctx).await? else {
        return Ok(Verdict::skipped(NOT_VISIBLE));
    };
    let mut sessions = Vec::with_capacity(CONTENDERS);
    for _ in 0..CONTENDERS {
        sessions.push(ctx.session().await?);
    }
    // An acquisition inside S1's transaction takes the row; rolled back, it
    // leaves the key as free as it was for the contenders.
    holder.batch("BEGIN TRANSACTION;").await?;
    let taken = holder
        .call(ACQUIRE, &[&key.as_str(), &Uuid::new_v4(), &LEASE_SECONDS])
        .await?
        .outcome();
    if taken != "Acquired" {
        holder.rollback().await;
        bail!("S1's acquisition inside its transaction answered {taken}");
    }
    let owners: Vec<Uuid> = (0..CONTENDERS).map(|_| Uuid::new_v4()).collect();
    // Sent together: the order among them does not matter, only that each
    // decides after S1 lets go.
    let mut sent = Vec::with_capacity(CONTENDERS);
    for (session, owner) in sessions.into_iter().zip(&owners) {
        sent.push(Sent::send(session, ACQUIRE, acquire_args(&key, *owner)).await?);
    }
    let mut queued = Vec::with_capacity(CONTENDERS);
    for call in &sent {
        queued.push(watcher.queue(call, holder_spid).await?);
    }
    holder.batch("ROLLBACK TRANSACTION;").await?;
    let mut answers = Vec::with_capacity(CONTENDERS);
    for call in sent {
        answers.push(call.answer().await?);
    }
    let after = state(&a, &key).await?;
    for ((session, answer), owner) in answers.iter_mut().zip(&owners) {
        release(session, &key, *owner, answer).await;
    }
    let count = |outcome: &str| answers.iter().filter(|(_, a)| a.outcome() == outcome).count();
    let all_queued = queued.iter().all(|q| *q == Queued::Waiting);
    Ok(Verdict::judge(
        all_queued
            && count("Acquired") == 1
            && count("Busy") == CONTENDERS - 1
            && after.generation == before.generation + 1,
        format!(
            "S1's acquisition {taken}; the four acquisitions {}; after S1's rollback: {}; generation {} → {}",
            queued.iter().map(|q| q.word()).collect::<Vec<_>>().join(", "),
            answers
                .iter()
                .map(|(_, a)| answer_name(a))
                .collect::<Vec<_>>()
                .join(", "),
            before.generation,
            after.generation
        ),
    ))
}

pub(crate) const PUBLISH_RACES_ACQUIRE: Check = Check {
    name: "publish_racing_acquisition",
    behaviour: "S1 holds a holder's fence row in an open transaction (AssertHolder); the holder's publish and \
                another session's acquisition are seen queued behind S1, then S1 rolls back: once with the lease live \
                (the acquisition queued first), once with a 3 s lease that ends while both wait (the publish queued \
                first, both sent before the lease's end)",
    document: "DESIGN (a publish is a conditional update on the row the acquisition changes); contract: A lease is \
               judged when its row is locked",
    expected: "live: the acquisition Busy, the publish Published and its payload stands; ended while waiting: the \
               publish Expired (judged when it got the row, not when it was sent), the acquisition Acquired with the \
               next generation, nothing published",
    run: |ctx| Box::pin(publish_races(ctx)),
};

async fn publish_races(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let Some((mut holder, holder_spid, mut watcher)) = holder_watched(ctx).await? else {
        return Ok(Verdict::skipped(NOT_VISIBLE));
    };
    let (publisher, acquirer) = (ctx.session().await?, ctx.session().await?);

    // Live lease: the acquisition gets the row first and finds it held;
    // the publish then lands.
    let key = ctx.key(&a, "race-live").await?;
    let from_holder = ctx.keys.payload("from the holder");
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let held = holder.hold(&lease).await?;
    let successor = Uuid::new_v4();
    let acquire = Sent::send(acquirer, ACQUIRE, acquire_args(&key, successor)).await?;
    let acquire_queued = watcher.queue(&acquire, holder_spid).await?;
    let publish = Sent::send(publisher, PUBLISH, publish_args(&lease, &from_holder)).await?;
    let publish_queued = watcher.queue(&publish, holder_spid).await?;
    holder.batch("ROLLBACK TRANSACTION;").await?;
    let (mut acquirer, acquire_live) = acquire.answer().await?;
    let (publisher, publish_live) = publish.answer().await?;
    let row_live = a.read_publication(&key).await?;
    release(&mut acquirer, &key, successor, &acquire_live).await;
    let _ = a.release(&lease).await;
    let live_held = held == "Holding"
        && (acquire_queued, publish_queued) == (Queued::Waiting, Queued::Waiting)
        && acquire_live.outcome() == "Busy"
        && publish_live.outcome() == "Published"
        && matches!(&row_live, Publication::Found { payload, generation, .. }
            if *payload == from_holder && *generation == lease.generation());
    let live_seen = format!(
        "live: S1 AssertHolder {held}; the acquisition {}, then the publish {}; after S1's rollback the acquisition \
         {}, the publish {}; row {}",
        acquire_queued.word(),
        publish_queued.word(),
        answer_name(&acquire_live),
        publish_live.outcome(),
        describe(&row_live)
    );

    // A lease that ends while both wait: the publish gets the row first,
    // after the lease's end, and must be judged then, not when it was sent.
    let key = ctx.key(&a, "race-expired").await?;
    let lease = acquired(a.acquire(&key, ENDING).await?)?;
    let held = holder.hold(&lease).await?;
    let publish = Sent::send(
        publisher,
        PUBLISH,
        publish_args(&lease, &ctx.keys.payload("sent while live")),
    )
    .await?;
    let publish_queued = watcher.queue(&publish, holder_spid).await?;
    let successor = Uuid::new_v4();
    let acquire = Sent::send(acquirer, ACQUIRE, acquire_args(&key, successor)).await?;
    let acquire_queued = watcher.queue(&acquire, holder_spid).await?;
    let queued_at = holder.now().await?;
    holder.wait_past(lease.until()).await?;
    holder.batch("ROLLBACK TRANSACTION;").await?;
    let (_, publish_dead) = publish.answer().await?;
    let (mut acquirer, acquire_dead) = acquire.answer().await?;
    let row_dead = a.read_publication(&key).await?;
    release(&mut acquirer, &key, successor, &acquire_dead).await;
    let sent_live = queued_at < lease.until();
    let dead_held = held == "Holding"
        && (publish_queued, acquire_queued) == (Queued::Waiting, Queued::Waiting)
        && sent_live
        && publish_dead.outcome() == "Expired"
        && acquire_dead.big("Generation") == Some(lease.generation() + 1)
        && !published_at(&row_dead, lease.generation());
    let dead_seen = format!(
        "ended while waiting: S1 AssertHolder {held}; the publish {}, then the acquisition {}, both {} the lease's \
         end ({} against {}); after S1's rollback the publish {}, the acquisition {}; row {}",
        publish_queued.word(),
        acquire_queued.word(),
        if sent_live {
            "queued before"
        } else {
            "NOT queued before"
        },
        clock(queued_at),
        clock(lease.until()),
        publish_dead.outcome(),
        answer_name(&acquire_dead),
        describe(&row_dead)
    );
    Ok(Verdict::judge(
        live_held && dead_held,
        format!("{live_seen}; {dead_seen}"),
    ))
}

fn acquire_args(key: &str, owner: Uuid) -> Vec<Box<dyn ToSql>> {
    vec![Box::new(key.to_string()), Box::new(owner), Box::new(LEASE_SECONDS)]
}

fn publish_args(lease: &Lease, payload: &str) -> Vec<Box<dyn ToSql>> {
    vec![
        Box::new(lease.key().to_string()),
        Box::new(lease.owner()),
        Box::new(lease.generation()),
        Box::new(Uuid::new_v4()),
        Box::new(payload.to_string()),
    ]
}

/// Releases what `answer` acquired for `owner`, if it did.
async fn release(session: &mut Session, key: &str, owner: Uuid, answer: &Answer) {
    if let (Some(generation), "Acquired") = (answer.big("Generation"), answer.outcome().as_str()) {
        let _ = session.call(RELEASE, &[&key, &owner, &generation]).await;
    }
}

/// An Acquire answer in a word, with the generation it acquired.
fn answer_name(answer: &Answer) -> String {
    match (answer.outcome().as_str(), answer.big("Generation")) {
        ("Acquired", Some(generation)) => format!("Acquired (generation {generation})"),
        (outcome, _) => outcome.to_string(),
    }
}

/// A server clock reading, to the millisecond.
fn clock(at: OffsetDateTime) -> String {
    let time = at.time();
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        time.hour(),
        time.minute(),
        time.second(),
        time.millisecond()
    )
}
