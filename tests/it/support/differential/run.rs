//! One schedule run twice, step by step: by the deployed procedures, each
//! worker on its own session, and by the model fed the server's clock.
//!
//! The clock of a call is the one the procedure read after its row lock.
//! Where the answer shows it (`ServerUtc`, a renewal's new end, a
//! recovery's time, a prune's bound) the model is given exactly that; where
//! it does not, the call happened between two readings of the server clock
//! on the same session, just before and just after it, and the model is
//! asked at each moment of that window where its answer can change (a lease
//! ending in it): the server's answer must be one of those. A time the call
//! stored without answering it (a publish's, a release's end of tenure) is
//! then read back (`GetOutcome`, `LeaseHistory`) and the model given exactly
//! that, so the times it keeps stay the server's.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fencepost::model::{
    Acquired, Answer, Call, Ending, Fence, ForceReleased, History, Inspected, KeyOrder, Outcome, Published, Recovered,
    Refusal, Released, Renewed, Session, SetPublished, SetRenewed,
};
use time::{Duration, OffsetDateTime};

use super::schedule::{Ctx, IDENTITIES, KEYS, PREFIXES, PROVISIONED, Step};
use super::server::{self, Seen};
use crate::support::caller::Caller;

/// What the runs of a test saw, printed at its end.
#[derive(Debug, Default)]
pub struct Tally {
    pub schedules: u64,
    /// Calls whose answers were compared.
    pub calls: u64,
    /// Calls whose answer the model could give only from the window
    /// around them, a lease ending inside it.
    pub in_window: u64,
    /// Calls whose stored time was read back.
    pub read_back: u64,
    /// Renewals and publishes by the owner of the current generation after
    /// its lease ran out with nobody after it: where a procedure that forgot
    /// the lease's end would revive it or publish under it.
    pub after_expiry: u64,
    /// Schedules with at least one of those.
    pub schedules_after_expiry: u64,
    /// Acquires that took a key another owner held last, its lease run out.
    pub takeovers: u64,
    /// How often each procedure answered each outcome or error.
    pub outcomes: BTreeMap<String, u64>,
}

impl Tally {
    pub fn summary(&self) -> String {
        let mut text = format!(
            "{} schedules, {} calls compared ({} judged within their round trip, {} stored times read back); \
             {} renewals or publishes of a lease that ran out with nobody after it, in {} schedules; \
             {} takeovers; {} set and slot calls",
            self.schedules,
            self.calls,
            self.in_window,
            self.read_back,
            self.after_expiry,
            self.schedules_after_expiry,
            self.takeovers,
            self.set_and_slot_calls()
        );
        for (outcome, n) in &self.outcomes {
            let _ = write!(text, "\n  {outcome}: {n}");
        }
        text
    }

    /// The kinds of call the run was meant to reach and did not: a
    /// takeover, a `Superseded` or `Expired` refusal, a replay, a call on a
    /// lease that ran out. A run that agreed without them showed little.
    pub fn missing(&self) -> Vec<&'static str> {
        let answered = |ends: &[&str]| {
            self.outcomes
                .iter()
                .any(|(outcome, n)| *n > 0 && ends.iter().any(|end| outcome.ends_with(end)))
        };
        let mut missing = Vec::new();
        if self.takeovers == 0 {
            missing.push("a takeover of another owner's run-out lease");
        }
        if !answered(&[" Superseded", " Expired", " 50110", " 50111"]) {
            missing.push("a Superseded or Expired refusal");
        }
        if !answered(&[" AlreadyPublished", " AlreadyRecovered"]) {
            missing.push("a replay answered from its record");
        }
        if self.after_expiry == 0 {
            missing.push("a renewal or publish of a lease that ran out with nobody after it");
        }
        if !answered(&["AcquireSet Acquired"]) {
            missing.push("a lease set granted");
        }
        if !answered(&["AcquireSlot Acquired"]) {
            missing.push("a slot granted");
        }
        missing
    }
}

/// How many set and slot calls the runs compared.
impl Tally {
    pub fn set_and_slot_calls(&self) -> u64 {
        let sets = [
            "AcquireSet",
            "RenewSet",
            "ReleaseSet",
            "PublishSet",
            "AssertHolderSet",
            "AcquireSlot",
        ];
        self.outcomes
            .iter()
            .filter(|(outcome, _)| sets.iter().any(|set| outcome.starts_with(&format!("fence_api.{set} "))))
            .map(|(_, n)| n)
            .sum()
    }
}

fn as_seen(answer: Result<Answer, Refusal>) -> Seen {
    answer.map_err(|refusal| (refusal.number, refusal.message.to_string()))
}

fn describe(seen: &Seen) -> String {
    match seen {
        Ok(answer) => format!("{answer:?}"),
        Err((number, message)) => format!("error {number}: {message}"),
    }
}

/// The clock the procedure read, when its answer shows it.
fn shown_clock(call: &Call, seen: &Seen) -> Option<OffsetDateTime> {
    let days = |call: &Call| match call {
        Call::PruneTenure { older_than_days } | Call::PruneOutcomes { older_than_days } => {
            Duration::days(older_than_days.unwrap_or_default().into())
        }
        _ => Duration::ZERO,
    };
    match (call, seen.as_ref().ok()?) {
        (_, Answer::Acquire(answer)) => Some(match *answer {
            fencepost::model::Acquired::Acquired { server_utc, .. }
            | fencepost::model::Acquired::Busy { server_utc, .. }
            | fencepost::model::Acquired::NotProvisioned { server_utc } => server_utc,
            _ => return None,
        }),
        (
            Call::Renew {
                lease_seconds: Some(seconds),
                ..
            },
            Answer::Renew(Renewed::Renewed { lease_until }),
        ) => Some(*lease_until - Duration::seconds((*seconds).into())),
        (Call::RenewMany { leases: Some(leases) }, Answer::RenewMany(rows)) => rows.iter().find_map(|(key, row)| {
            let Renewed::Renewed { lease_until } = row else {
                return None;
            };
            let listed = leases
                .iter()
                .find(|l| l.resource_key.as_deref() == Some(key.as_str()))?;
            Some(*lease_until - Duration::seconds(listed.lease_seconds?.into()))
        }),
        (_, Answer::AcquireSet { server_utc, .. }) => Some(*server_utc),
        (_, Answer::AcquireSlot(acquired)) => Some(acquired.server_utc()),
        (
            Call::RenewSet {
                lease_seconds: Some(seconds),
                ..
            },
            Answer::RenewSet(rows),
        ) => rows.iter().find_map(|(_, row)| match row {
            SetRenewed::Renewed { lease_until } => Some(*lease_until - Duration::seconds((*seconds).into())),
            _ => None,
        }),
        (_, Answer::Inspect(Inspected::Found(state))) => Some(state.server_utc),
        (_, Answer::Inspect(Inspected::NotProvisioned { server_utc })) => Some(*server_utc),
        (_, Answer::ListLeases(rows)) => rows.first().map(|row| row.state.server_utc),
        (_, Answer::LeaseHistory(History::Found(rows))) => rows.first().map(|row| row.server_utc),
        (_, Answer::LeaseHistory(History::NotProvisioned { server_utc })) => Some(*server_utc),
        (_, Answer::Recover(Recovered::Recovered(recovery))) => Some(recovery.recovered_at),
        (_, Answer::PruneTenure { ended_before, .. }) => Some(*ended_before + days(call)),
        (_, Answer::PruneOutcomes { recorded_before, .. }) => Some(*recorded_before + days(call)),
        _ => None,
    }
}

/// The moments of `from..=to` where the model's answer can change: each
/// end, and both sides of every lease end inside.
fn window(fence: &Fence, from: OffsetDateTime, to: OffsetDateTime) -> Vec<OffsetDateTime> {
    let tick = Duration::nanoseconds(100);
    let mut moments = vec![from];
    for (_, row) in fence.resources() {
        if let Some(end) = row.lease_until
            && from < end
            && end <= to
        {
            moments.extend([end - tick, end]);
        }
    }
    moments.push(to);
    moments.dedup();
    moments
}

/// The time a call stored without answering it, read back on `conn`.
async fn stored_clock(conn: &mut Caller, call: &Call, seen: &Seen) -> Option<OffsetDateTime> {
    let ended = |history: Seen, generation: i64, ending: Ending| match history {
        Ok(Answer::LeaseHistory(History::Found(rows))) => rows
            .iter()
            .find(|row| row.generation == generation && row.ending == Some(ending))
            .and_then(|row| row.ended_at),
        _ => None,
    };
    match (call, seen.as_ref().ok()?) {
        (
            Call::Publish {
                operation_id: Some(id), ..
            },
            Answer::Publish(Published::Published),
        ) => match server::call(&mut conn.conn, &Call::get_outcome(*id), Session::Autocommit).await {
            Ok(Answer::GetOutcome(Outcome::Published { published_at, .. })) => Some(published_at),
            _ => None,
        },
        (
            Call::Release {
                resource_key: Some(key),
                generation: Some(generation),
                ..
            },
            Answer::Release(Released::Released),
        ) => {
            let history = server::call(&mut conn.conn, &Call::lease_history(key), Session::Autocommit).await;
            ended(history, *generation, Ending::Released)
        }
        (
            Call::ForceRelease {
                resource_key: Some(key),
                ..
            },
            Answer::ForceRelease(ForceReleased::Fenced { generation }),
        ) => {
            let history = server::call(&mut conn.conn, &Call::lease_history(key), Session::Autocommit).await;
            ended(history, generation - 1, Ending::ForceReleased)
        }
        (
            Call::PublishSet {
                leases: Some(leases), ..
            },
            Answer::PublishSet(rows),
        ) => {
            let (key, _) = rows.iter().find(|(_, row)| *row == SetPublished::Published)?;
            let id = set_item(leases, key, "OperationId")?.parse().ok()?;
            match server::call(&mut conn.conn, &Call::get_outcome(id), Session::Autocommit).await {
                Ok(Answer::GetOutcome(Outcome::Published { published_at, .. })) => Some(published_at),
                _ => None,
            }
        }
        (
            Call::ReleaseSet {
                leases: Some(leases), ..
            },
            Answer::ReleaseSet(rows),
        ) => {
            let (key, _) = rows.iter().find(|(_, row)| *row == Released::Released)?;
            let generation = set_item(leases, key, "Generation")?.parse().ok()?;
            let history = server::call(&mut conn.conn, &Call::lease_history(key), Session::Autocommit).await;
            ended(history, generation, Ending::Released)
        }
        _ => None,
    }
}

/// The text of `field` in the item of the set's `@Leases` for `key`.
fn set_item(leases: &str, key: &str, field: &str) -> Option<String> {
    let items: Vec<serde_json::Value> = serde_json::from_str(leases).ok()?;
    let item = items.iter().find(|item| item["ResourceKey"] == key)?;
    match &item[field] {
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// Whether `call` renews or publishes under the current generation's owner
/// after its lease ran out at `at`, with nobody after it.
fn ran_out_unfollowed(fence: &Fence, call: &Call, at: OffsetDateTime) -> bool {
    let (Call::Renew {
        resource_key: Some(key),
        owner,
        generation,
        ..
    }
    | Call::Publish {
        resource_key: Some(key),
        owner,
        generation,
        ..
    }) = call
    else {
        return false;
    };
    fence.resource(key).is_some_and(|row| {
        row.owner.is_some() && row.owner == *owner && Some(row.generation) == *generation && !row.is_held(at)
    })
}

/// An acquire of a key whose row names another owner: answered
/// `Acquired`, it took over that owner's run-out lease.
fn held_by_another(fence: &Fence, call: &Call) -> bool {
    let Call::Acquire {
        resource_key: Some(key),
        owner,
        ..
    } = call
    else {
        return false;
    };
    fence
        .resource(key)
        .is_some_and(|row| row.owner.is_some() && row.owner != *owner)
}

/// Sends `call` to the server on `conn` and asks the model the same; the
/// model moves on only when they agree.
async fn compare(
    conn: &mut Caller,
    fence: &mut Fence,
    call: &Call,
    session: Session,
    tally: &mut Tally,
) -> Result<Seen, String> {
    let before = conn.server_now().await.assume_utc();
    let seen = server::call(&mut conn.conn, call, session).await;
    let after = conn.server_now().await.assume_utc();
    tally.calls += 1;
    if ran_out_unfollowed(fence, call, before) {
        tally.after_expiry += 1;
    }
    if matches!(seen, Ok(Answer::Acquire(Acquired::Acquired { .. }))) && held_by_another(fence, call) {
        tally.takeovers += 1;
    }
    let name = match &seen {
        Ok(answer) => answer.outcome().to_string(),
        Err((number, _)) => number.to_string(),
    };
    *tally
        .outcomes
        .entry(format!("{} {name}", call.procedure()))
        .or_default() += 1;
    let moments = match shown_clock(call, &seen) {
        Some(at) if at < before || at > after => {
            return Err(format!(
                "{}: the clock its answer shows, {at}, is outside the window {before}..{after}: {}",
                call.procedure(),
                describe(&seen)
            ));
        }
        Some(at) => vec![at],
        None => window(fence, before, after),
    };
    let answers: Vec<(Fence, OffsetDateTime, Seen)> = moments
        .iter()
        .map(|at| {
            let mut model = fence.clone();
            let answer = as_seen(model.call(call, session, *at));
            (model, *at, answer)
        })
        .collect();
    if answers.iter().any(|(_, _, answer)| *answer != answers[0].2) {
        tally.in_window += 1;
    }
    let Some((mut model, at, _)) = answers.iter().find(|(_, _, answer)| *answer == seen).cloned() else {
        let models: Vec<String> = answers
            .iter()
            .map(|(_, at, answer)| format!("  model at {at}: {}", describe(answer)))
            .collect();
        return Err(format!(
            "{} disagrees ({session:?})\n  {call:?}\n  server ({before}..{after}): {}\n{}",
            call.procedure(),
            describe(&seen),
            models.join("\n")
        ));
    };
    if let Some(stored) = stored_clock(conn, call, &seen).await
        && stored != at
        && before <= stored
        && stored <= after
    {
        tally.read_back += 1;
        model = fence.clone();
        let answer = as_seen(model.call(call, session, stored));
        if answer != seen {
            return Err(format!(
                "{} disagrees at the time it stored, {stored} ({session:?})\n  {call:?}\n  server: {}\n  model:  {}",
                call.procedure(),
                describe(&seen),
                describe(&answer)
            ));
        }
    }
    *fence = model;
    Ok(seen)
}

/// Runs `schedule` on the server (`workers`, one session each, on a fence
/// emptied beforehand) and on the model (its keys in the engine's `order`),
/// and then reads every key's final state from both: `Err` describes the
/// first disagreement and what ran before it.
pub async fn run(workers: &mut [Caller], order: KeyOrder, schedule: &[Step], tally: &mut Tally) -> Result<(), String> {
    let mut fence = Fence::with_key_order(order);
    let mut ctx = Ctx::default();
    let mut trace = String::new();
    let after_expiry = tally.after_expiry;
    let failed = |trace: &str, what: String| format!("{what}\nafter:\n{trace}");
    for key in PROVISIONED {
        let call = Call::provision(KEYS[key]);
        compare(&mut workers[0], &mut fence, &call, Session::Autocommit, tally)
            .await
            .map(drop)
            .map_err(|what| failed(&trace, what))?;
    }
    for (index, step) in schedule.iter().enumerate() {
        if let Some(wait) = step.wait() {
            tokio::time::sleep(wait).await;
            let _ = writeln!(trace, "  {index}: wait {wait:?}");
            continue;
        }
        if let Step::WaitOut { by, key } = *step {
            let key = KEYS[ctx.key(by, key)];
            let end = fence
                .resource(key)
                .filter(|row| row.owner.is_some())
                .and_then(|row| row.lease_until);
            if let Some(end) = end {
                let now = workers[by].server_now().await.assume_utc();
                if let Ok(left) = std::time::Duration::try_from(end - now) {
                    // Past the end by a margin the server's clock surely took.
                    tokio::time::sleep(left + std::time::Duration::from_millis(20)).await;
                }
            }
            let _ = writeln!(trace, "  {index}: wait out the lease on {key:?} (until {end:?})");
            continue;
        }
        let (call, session) = ctx.resolve(step).expect("a step that calls");
        let by = step.by().expect("a step that calls");
        let seen = compare(&mut workers[by], &mut fence, &call, session, tally)
            .await
            .map_err(|what| failed(&trace, format!("step {index}, worker {by}: {what}")))?;
        let _ = writeln!(trace, "  {index}: worker {by} {call:?} -> {}", describe(&seen));
        ctx.learn(step, &call, &seen);
    }
    // The final state of every key, and every publish's record.
    let mut reads = Vec::new();
    for key in KEYS {
        reads.extend([
            Call::inspect(key),
            Call::read_publication(key),
            Call::lease_history(key),
        ]);
    }
    let mut operations = ctx.operations.clone();
    operations.sort();
    operations.dedup();
    reads.extend(operations.into_iter().map(Call::get_outcome));
    reads.extend(PREFIXES.iter().map(|prefix| Call::ListLeases {
        prefix: Some(prefix.to_string()),
        held_only: Some(false),
        max_rows: Some(1000),
        after: None,
    }));
    // A recovery that records an identity, then its replay naming another:
    // the replay answers the first and records nothing.
    let recovery_id = uuid::Uuid::new_v4();
    for identity in IDENTITIES {
        reads.push(Call::Recover {
            recovery_id: Some(recovery_id),
            floor: None,
            database_identity: Some(identity),
        });
    }
    for call in reads {
        compare(&mut workers[0], &mut fence, &call, Session::Autocommit, tally)
            .await
            .map(drop)
            .map_err(|what| failed(&trace, format!("the final state: {what}")))?;
    }
    let recorded = server::database_identity(&mut workers[0].conn).await;
    if recorded != fence.database_identity() {
        return Err(failed(
            &trace,
            format!(
                "the final state: the fence records the database identity {recorded:?}, the model {:?}",
                fence.database_identity()
            ),
        ));
    }
    tally.schedules += 1;
    if std::env::var_os("FENCEPOST_MODEL_TRACE").is_some() {
        eprintln!("schedule agreed:\n{trace}");
    }
    if tally.after_expiry > after_expiry {
        tally.schedules_after_expiry += 1;
    }
    Ok(())
}
