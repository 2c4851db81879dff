//! Acquiring a lease set with a deadline: between attempts, wait on the
//! handover signals of the keys that were busy, so the set is asked for
//! again as soon as the last of them is let go.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::call::batch_on;
use super::contract::Procedure;
use super::handover::{CHECKOUT_GRACE, HELD_WAIT, resource};
use super::wait::{Backoff, Retries, SETTLE, later};
use super::{AcquireSet, Client, Error, KeyRefusal, meter};
use crate::tsql::after_applock;

/// Blocks on each signal named in `@P1` in turn (each name 80 characters,
/// as `handover::resource` makes them), shared, so waiters never queue
/// behind each other, and lets go of each at once; all of them within `@P2`
/// ms (once that time is up, the rest are left unseen, and at most one
/// request was refused). Answers how many were still held at the end, how
/// many were let go of while it waited, and whether any was left unseen (SQL Server answers 1 for a grant that waited;
/// Babelfish answers 0, so a grant later than `@P3` µs counts too).
const WAIT_FOR_SIGNALS: &str = concat!(
    "DECLARE @Names nvarchar(max) = @P1, @Until datetime2(7) = DATEADD(millisecond, @P2, SYSUTCDATETIME()),
        @At int = 1, @Name nvarchar(255), @Signal int, @Left int, @Before datetime2(7), @Waited int,
        @Held int = 0, @Released int = 0, @Unseen int = 0;
WHILE @At <= LEN(@Names)
BEGIN
    SET @Left = DATEDIFF(millisecond, SYSUTCDATETIME(), @Until);
    -- Time is up: the keys not looked at are left unseen.
    IF @Left < 1 AND @At > 1
    BEGIN
        SET @Unseen = 1;
        BREAK;
    END;
    IF @Left < 1 SET @Left = 1;
    SET @Name = SUBSTRING(@Names, @At, 80);
    SET @Before = SYSUTCDATETIME();
    EXEC @Signal = sp_getapplock @Resource = @Name, @LockMode = N'Shared', @LockOwner = N'Session', @LockTimeout = @Left;
    SET @Waited = DATEDIFF(microsecond, @Before, SYSUTCDATETIME());
    IF @Signal >= 0 EXEC sp_releaseapplock @Resource = @Name, @LockOwner = N'Session';
    ",
    after_applock!("@Signal"),
    "
    IF @Signal < 0 SET @Held = @Held + 1;
    IF @Signal = 1 OR (@Signal = 0 AND @Waited >= @P3) SET @Released = @Released + 1;
    SET @At = @At + 80;
END;
SELECT @Held AS Held, @Released AS Released, @Unseen AS Unseen;"
);

/// How the pause before the next attempt is spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pause {
    /// A short sleep first, so that a new holder's guard has raised its
    /// signal, then blocked on the signals for the rest.
    Settle,
    /// Blocked on the signals for the whole pause.
    Signalled,
    /// Asleep for the whole pause, this many pauses in a row before a look
    /// at the signals again: the holders raise no signal.
    Polled(u8),
}

/// How many pauses in a row a waiter sleeps after a look found no busy key
/// signalled, before it looks again: a holder that raises no signal costs
/// a look every few pauses, not every one.
const POLLS_BETWEEN_LOOKS: u8 = 3;

/// How a wait on the busy keys' signals ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Woke {
    /// The pause was spent: a signal was held to its end (its guard still
    /// holds the key), or there was no signal session to wait on.
    Spent,
    /// Every signal was free by the end, and one was let go of meanwhile.
    Released,
    /// Every signal looked at was free from the start (those the pause left
    /// no time for unseen): no guard signals these keys, as far as seen.
    Free,
}

impl Client {
    /// Acquires every key of `keys` for `length`, all or nothing, waiting up
    /// to `wait` while keys are busy: [`acquire_set`](Client::acquire_set)
    /// with a deadline, as [`acquire_waiting`](Client::acquire_waiting) is
    /// [`acquire`](Client::acquire) with one.
    ///
    /// Every attempt is sent as the same owner, so a retry after a lost
    /// reply confirms the grant. After a `Refused` with busy keys, the next
    /// attempt waits for the latest holder's expiry the server gave (counted
    /// on the local monotonic clock from when the request was sent, plus
    /// jitter), at most a second at a time. That pause is spent blocked on
    /// the handover signals of the busy keys, one after another, on a signal
    /// session of the client's: a holder's guard (a [`LeaseGuard`](super::LeaseGuard)
    /// or a [`LeaseSetGuard`](super::LeaseSetGuard)) lets go of its key's
    /// signal right after its release, so the set is asked for again as soon
    /// as the last busy key is let go, about a round trip later than a
    /// single key's waiter. Holders that raise no signal are polled at that
    /// pace, with a look at their signals every few pauses. The signals
    /// decide nothing: `AcquireSet` does. A set refused with a key
    /// `NotProvisioned` returns at once; a wait for a fence row given up
    /// ([`AcquireSet::RowHeld`]) is contention, and is asked again after a
    /// pause. An attempt whose reply was lost is confirmed as
    /// [`acquire_waiting`](Client::acquire_waiting) confirms one (also past
    /// the deadline, for a few call timeouts or the lease length); other
    /// transient errors (a deadlock, a failover) are retried until the
    /// deadline, and every other error returns at once. One last attempt is
    /// made at the deadline; if it is refused, that answer is returned.
    pub async fn acquire_set_waiting(
        &self,
        keys: &[&str],
        length: Duration,
        wait: Duration,
    ) -> Result<AcquireSet, Error> {
        let deadline = later(Instant::now(), wait);
        let owner = Uuid::new_v4();
        let started = Instant::now();
        let mut backoff = Backoff::default();
        let mut next = Pause::Settle;
        // Whether the last look's release was chased already: one seen twice
        // in a row without the set being granted (a hot key handed from
        // holder to holder) is then polled, not chased again.
        let mut chasing = false;
        loop {
            let sent_at = Instant::now();
            let retries = Retries {
                confirm_until: self.confirm_until(sent_at, length),
                deadline,
            };
            let answer = self.acquire_set_retrying(keys, owner, length, retries).await?;
            let (busy, remaining) = match &answer {
                AcquireSet::Acquired(_) => {
                    meter::handover_wait(started.elapsed());
                    return Ok(answer);
                }
                AcquireSet::Refused(refusals) => match busy_keys(refusals) {
                    Some(busy) => busy,
                    None => return Ok(answer),
                },
                AcquireSet::RowHeld => (Vec::new(), Duration::ZERO),
            };
            let Some(pause) = backoff.pause_before(deadline, remaining, sent_at) else {
                return Ok(answer);
            };
            let end = Instant::now() + pause;
            next = match next {
                _ if busy.is_empty() => {
                    tokio::time::sleep_until(end).await;
                    chasing = false;
                    Pause::Settle
                }
                Pause::Polled(_) => {
                    tokio::time::sleep_until(end).await;
                    chasing = false;
                    after_poll(next)
                }
                // A look at the signals is followed by an attempt at once;
                // how it ended says how the pause after that attempt is
                // spent, if the set is refused again.
                Pause::Settle => {
                    tokio::time::sleep(SETTLE.min(pause)).await;
                    after_look(self.wait_for_signals(&busy, end).await, &mut chasing)
                }
                Pause::Signalled => after_look(self.wait_for_signals(&busy, end).await, &mut chasing),
            };
        }
    }

    /// Blocks on the signal of each key of `keys` in turn until it is free,
    /// all by `end`, on a signal session; without one, sleeps until `end`.
    async fn wait_for_signals(&self, keys: &[&str], end: Instant) -> Woke {
        let started = Instant::now();
        // The request must end well inside the call timeout.
        let end = end.min(started + self.config.call_timeout / 2);
        // A fake raises no signal: the wait is a poll's pause.
        #[cfg(feature = "fake")]
        if self.as_fake().is_some() {
            tokio::time::sleep_until(end).await;
            return Woke::Spent;
        }
        let checkout = tokio::time::timeout_at(end.max(started + CHECKOUT_GRACE), self.signals.get()).await;
        meter::signal_sessions(&self.signals);
        let Ok(Ok(mut session)) = checkout else {
            self.warn_if_signals_ran_out();
            tokio::time::sleep_until(end).await;
            return Woke::Spent;
        };
        // At least a millisecond: Babelfish answers a lock request that may
        // not wait at all with "unavailable" even when someone holds it.
        let millis = i32::try_from(end.saturating_duration_since(Instant::now()).as_millis())
            .unwrap_or(i32::MAX)
            .max(1);
        let held_wait = i32::try_from(HELD_WAIT.as_micros()).unwrap_or(i32::MAX);
        let names: String = keys.iter().map(|key| resource(key)).collect();
        self.requests.fetch_add(1, Ordering::Relaxed);
        let waited = batch_on(
            &mut session,
            &self.config,
            Procedure::AcquireSet,
            WAIT_FOR_SIGNALS,
            &[&names, &millis, &held_wait],
            Some(1),
        )
        .await
        .and_then(|replies| {
            let reply = &replies[0];
            Ok((reply.required::<i32>("Held")?, reply.required::<i32>("Released")?))
        });
        match waited {
            // Spent to the pause's end, also when a request was refused at
            // once (an engine answering "unavailable").
            Ok((held, _)) if held > 0 => {
                tokio::time::sleep_until(end).await;
                Woke::Spent
            }
            Ok((_, released)) if released > 0 => Woke::Released,
            // Nothing held: what was left unseen is polled with the rest.
            Ok(_) => Woke::Free,
            // Only a wake-up call failed: spend the pause as a poll would.
            Err(error) => {
                tracing::debug!(%error, "waiting on a set's handover signals failed; polling");
                tokio::time::sleep_until(end).await;
                Woke::Spent
            }
        }
    }
}

/// How the pause after the next attempt is spent, after a look at the
/// signals that ended `woke`; `chasing` says whether the look before it
/// ended in a release too.
fn after_look(woke: Woke, chasing: &mut bool) -> Pause {
    let (next, chase) = match woke {
        // A guard still held a key at the pause's end: block on its signal
        // again.
        Woke::Spent => (Pause::Signalled, false),
        // A holder let go, yet the set may be refused (a waiter on that key
        // took it first): a successor's guard raises its signal a moment
        // after its grant. Not twice in a row.
        Woke::Released if !*chasing => (Pause::Settle, true),
        Woke::Released => (Pause::Polled(1), false),
        // No busy key's holder signalled: poll, and look again later.
        Woke::Free => (Pause::Polled(POLLS_BETWEEN_LOOKS), false),
    };
    *chasing = chase;
    next
}

/// How the pause after a poll is spent: polled again while polls are due,
/// then a look at the signals.
fn after_poll(polled: Pause) -> Pause {
    match polled {
        Pause::Polled(more) if more > 1 => Pause::Polled(more - 1),
        _ => Pause::Settle,
    }
}

/// The busy keys of a refused set and the longest time a holder had left,
/// or `None` when waiting cannot help (a key not provisioned).
fn busy_keys(refusals: &[(String, KeyRefusal)]) -> Option<(Vec<&str>, Duration)> {
    let mut busy = Vec::new();
    let mut longest = Duration::ZERO;
    for (key, refusal) in refusals {
        match refusal {
            KeyRefusal::Busy { remaining, .. } => {
                busy.push(key.as_str());
                longest = longest.max(*remaining);
            }
            KeyRefusal::Withheld => {}
            KeyRefusal::NotProvisioned => return None,
        }
    }
    (!busy.is_empty()).then_some((busy, longest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(seconds: u64) -> KeyRefusal {
        KeyRefusal::Busy {
            until: time::OffsetDateTime::UNIX_EPOCH,
            remaining: Duration::from_secs(seconds),
        }
    }

    #[test]
    fn a_set_waits_for_its_longest_held_key() {
        let refusals = vec![
            ("a".to_string(), busy(2)),
            ("b".to_string(), KeyRefusal::Withheld),
            ("c".to_string(), busy(5)),
        ];
        assert_eq!(busy_keys(&refusals), Some((vec!["a", "c"], Duration::from_secs(5))));
    }

    #[test]
    fn a_release_is_chased_once_then_polled_and_a_signal_held_is_watched_again() {
        let mut chasing = false;
        assert_eq!(after_look(Woke::Released, &mut chasing), Pause::Settle);
        assert_eq!(after_look(Woke::Released, &mut chasing), Pause::Polled(1));
        assert_eq!(after_poll(Pause::Polled(1)), Pause::Settle);
        assert_eq!(after_look(Woke::Released, &mut chasing), Pause::Settle);
        assert_eq!(after_look(Woke::Spent, &mut chasing), Pause::Signalled);
        assert_eq!(
            after_look(Woke::Released, &mut chasing),
            Pause::Settle,
            "a watched release is chased"
        );
    }

    #[test]
    fn holders_without_a_signal_are_polled_a_few_pauses_between_looks() {
        let mut chasing = false;
        let mut next = after_look(Woke::Free, &mut chasing);
        let mut polls = 0;
        while let Pause::Polled(_) = next {
            polls += 1;
            next = after_poll(next);
        }
        assert_eq!((polls, next), (POLLS_BETWEEN_LOOKS, Pause::Settle));
    }

    #[test]
    fn a_key_not_provisioned_is_not_waited_for() {
        let refusals = vec![
            ("a".to_string(), busy(2)),
            ("b".to_string(), KeyRefusal::NotProvisioned),
        ];
        assert_eq!(busy_keys(&refusals), None);
    }
}
