//! A client's guards renew together: the renewals due in one tick go out in
//! one `fence_api.RenewMany` call, instead of one `Renew` call each.
//!
//! Each guard still times its own renewals (a third into its lease), but on
//! a grid of ticks its client shares (a second, or a quarter of the renewal
//! period for a lease too short for that), rounded down, so the guards due
//! in one tick wake at the same instant and at most a tick early. A task of
//! the client gathers what they send for a few milliseconds and renews it in
//! one call, in calls of at most 1000 leases. A service holding 10,000
//! leases of 30 s thus sends about one call a second, not 1,000.
//!
//! Each call is hedged as a guard's own renewal is (see `hedged_renew`):
//! with no answer after a quarter of the time left before the first of its
//! leases would be given up, the same call is sent again on the client's
//! spare connection, and whichever answers first decides. A lease whose
//! time runs out meanwhile is given up alone; the others are asked for
//! again. The calls take their connections from the renewals' own pool.
//!
//! One row held by another session's transaction must not hold up the
//! renewal of any other lease: `RenewMany` waits at most
//! [`ROW_WAIT_BOUND`] for its rows, then renews nothing and fails. Every
//! lease of such a call is then renewed by itself with `Renew` at once, so
//! a lease whose row is free is renewed a second late at most, and only the
//! lease whose row is held waits for it, as it would alone. A call's second
//! attempt never starts within that bound: it would queue behind the rows
//! its first attempt holds while the first waits, and fail a second after
//! it, too late for a short lease. A database that has no `RenewMany` (a
//! contract older than 1.7) has every lease renewed one by one for
//! [`RECHECK_MISSING`], then the client tries renewing together again, so
//! a deploy of the newer contract, or a failover to a copy that has it, is
//! taken up within a minute at the cost of one refused call a minute; any
//! other failure of a call has its leases renewed one by one for that tick
//! only.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::hedged_renew::{self, MAX_IN_FLIGHT, Renewal, Slot, hedge_delay};
use super::renew_many::{MAX_RENEW_MANY, ROW_WAIT_BOUND};
use super::{Client, Lease, Renew};

/// The grid a guard's renewal is rounded down to, for a lease long enough.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// How long the renewals that woke together are gathered before they are
/// sent: their timers fire within a millisecond of each other.
const GATHER: Duration = Duration::from_millis(5);

/// How long a client renews each lease by itself after the database
/// answered that it has no `RenewMany`, before it tries again.
pub(crate) const RECHECK_MISSING: Duration = Duration::from_secs(60);

/// How long after the lock bound a call's first attempt may still answer
/// before a second one joins it: the time an answer takes to come back.
const ANSWER_MARGIN: Duration = Duration::from_millis(250);

/// One guard's renewal, due now.
struct Due {
    /// The guard's client, which makes the call: the gathering task holds
    /// none between calls, so it ends with the client.
    client: Client,
    lease: Lease,
    /// When the guard gives the lease up if no renewal was confirmed.
    give_up: Instant,
    /// The pause before an attempt after one that failed.
    retry_pause: Duration,
    answer: oneshot::Sender<Renewal>,
}

/// The renewals of one client's guards, gathered and sent together.
pub(crate) struct RenewalBatches {
    /// The origin of the client's grid of ticks.
    epoch: Instant,
    /// The gathering task's inbox, started on the first renewal and again
    /// when the runtime it ran on has ended.
    inbox: Mutex<Option<UnboundedSender<Due>>>,
    /// Whether every lease is renewed by itself instead.
    one_by_one: Mutex<OneByOne>,
}

/// When a client's guards renew each lease by itself.
#[derive(Clone, Copy, Debug, PartialEq)]
enum OneByOne {
    /// Never: they renew together.
    No,
    /// Until this instant: the database answered that it has no `RenewMany`.
    Until(Instant),
    /// For the client's life: the bench's baseline.
    #[cfg(feature = "bench")]
    Always,
}

impl RenewalBatches {
    pub(crate) fn new() -> RenewalBatches {
        RenewalBatches {
            epoch: Instant::now(),
            inbox: Mutex::new(None),
            one_by_one: Mutex::new(OneByOne::No),
        }
    }

    /// Whether a renewal due now goes out by itself.
    fn one_by_one(&self) -> bool {
        match *self.one_by_one.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            OneByOne::No => false,
            OneByOne::Until(until) => Instant::now() < until,
            #[cfg(feature = "bench")]
            OneByOne::Always => true,
        }
    }

    /// Every renewal goes out by itself for [`RECHECK_MISSING`]: the
    /// database has no `RenewMany`.
    fn without_renew_many(&self) {
        let mut one_by_one = self.one_by_one.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        #[cfg(feature = "bench")]
        if *one_by_one == OneByOne::Always {
            return;
        }
        *one_by_one = OneByOne::Until(Instant::now() + RECHECK_MISSING);
    }

    /// The instant a renewal due at `due`, every `period`, is sent: `due`
    /// rounded down to the client's grid of ticks, [`TICK`] or a quarter of
    /// `period` if that is shorter. So the guards due in one tick wake
    /// together, and none renews more than a tick early.
    pub(crate) fn tick_of(&self, due: Instant, period: Duration) -> Instant {
        if due <= self.epoch {
            return due;
        }
        let tick = TICK.min(period / 4).max(Duration::from_millis(1));
        let since = due.saturating_duration_since(self.epoch);
        let ticks = since.as_nanos() / tick.as_nanos();
        let rounded = Duration::from_nanos(u64::try_from(ticks * tick.as_nanos()).unwrap_or(u64::MAX));
        self.epoch + rounded
    }

    /// The gathering task's inbox, started on the current runtime if it is
    /// not running.
    fn inbox(&self) -> UnboundedSender<Due> {
        let mut inbox = self.inbox.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(sender) = inbox.as_ref().filter(|sender| !sender.is_closed()) {
            return sender.clone();
        }
        let (sender, dues) = unbounded_channel();
        tokio::spawn(gather(dues));
        *inbox = Some(sender.clone());
        sender
    }
}

impl Client {
    /// From now on, every guard of this client renews by itself, one
    /// `Renew` each, as guards did before they renewed together: the
    /// baseline `fencepost bench` sets beside renewing together.
    #[cfg(feature = "bench")]
    pub(crate) fn renew_each_lease_alone(&self) {
        *self
            .renewal_batches
            .one_by_one
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = OneByOne::Always;
    }

    /// Renews `lease` with the other renewals of this client's guards due at
    /// the same time, by `give_up` or not at all.
    pub(crate) async fn renew_together(&self, lease: &Lease, give_up: Instant, retry_pause: Duration) -> Renewal {
        if self.renewal_batches.one_by_one() {
            return hedged_renew::renew_hedged(self, lease, give_up, retry_pause).await;
        }
        let (answer, answered) = oneshot::channel();
        let due = Due {
            client: self.clone(),
            lease: lease.clone(),
            give_up,
            retry_pause,
            answer,
        };
        if self.renewal_batches.inbox().send(due).is_err() {
            return hedged_renew::renew_hedged(self, lease, give_up, retry_pause).await;
        }
        // Bounded here too by the guard's own give-up, whatever the call
        // renewing it does: a guard never believes it holds a lease past
        // its local deadline.
        match tokio::time::timeout_at(give_up, answered).await {
            Ok(Ok(renewal)) => renewal,
            // The task that renewed it ended without an answer (its runtime
            // shut down): this guard renews by itself.
            Ok(Err(_)) => hedged_renew::renew_hedged(self, lease, give_up, retry_pause).await,
            Err(_) => Renewal::Unanswered {
                last_error: Some("the call renewing it with other leases did not answer by its give-up".to_string()),
            },
        }
    }
}

/// The gathering task: what arrives within [`GATHER`] of a first renewal
/// goes out together, on a task of its own, so a slow call never delays
/// the next tick's.
async fn gather(mut dues: UnboundedReceiver<Due>) {
    while let Some(first) = dues.recv().await {
        let mut batch = vec![first];
        let until = Instant::now() + GATHER;
        loop {
            tokio::select! {
                biased;
                due = dues.recv() => match due {
                    Some(due) => batch.push(due),
                    None => break,
                },
                () = tokio::time::sleep_until(until) => break,
            }
        }
        tokio::spawn(renew_batch(batch));
    }
}

/// Renews `batch`: in calls of at most 1000 leases, each key once per call
/// (two guards of one key, a stale one and its successor, go in two).
async fn renew_batch(batch: Vec<Due>) {
    let mut calls: Vec<(HashSet<String>, Vec<Due>)> = Vec::new();
    for due in batch {
        let key = due.lease.key().to_string();
        let call = calls
            .iter_mut()
            .find(|(keys, dues)| dues.len() < MAX_RENEW_MANY && !keys.contains(&key));
        match call {
            Some((keys, dues)) => {
                keys.insert(key);
                dues.push(due);
            }
            None => calls.push((HashSet::from([key]), vec![due])),
        }
    }
    let calls = calls.into_iter().map(|(_, dues)| renew_group(dues));
    futures_util::future::join_all(calls).await;
}

/// Renews `dues` in one hedged call, or, when it failed, each by itself
/// (see the module). A group of one is a plain renewal.
fn renew_group(mut dues: Vec<Due>) -> futures_util::future::BoxFuture<'static, ()> {
    async move {
        if dues.len() == 1 {
            let due = dues.remove(0);
            return renew_alone(due).await;
        }
        let client = dues[0].client.clone();
        let started = Instant::now();
        let retry_pause = dues.iter().map(|due| due.retry_pause).min().unwrap_or(Duration::from_millis(50));
        let mut in_flight = FuturesUnordered::new();
        in_flight.push(attempt(&client, leases(&dues), Slot::Own));
        let mut own_free = false;
        let mut last_error: Option<String> = None;
        let mut next_start = started + second_attempt_delay(started, first_give_up(&dues));
        loop {
            let give_up = first_give_up(&dues);
            tokio::select! {
                biased;
                Some((answer, slot)) = in_flight.next() => {
                    own_free |= slot == Slot::Own;
                    match answer {
                        Ok((answers, sent_at)) => return answer_each(dues, &answers, sent_at),
                        // Some row of the call is held: whichever attempt
                        // says so, every lease is renewed by itself now,
                        // the free ones at once, the held one when its
                        // row is free (see the module).
                        Err(error) if error.gave_up_waiting_for_the_row() => {
                            tracing::debug!(leases = dues.len(), %error, "a renewal of many waited too long for a row; renewing each by itself");
                            drop(in_flight);
                            return one_by_one(dues).await;
                        }
                        Err(error) if error.procedure_is_missing() => {
                            tracing::warn!(%error, "the database has no fence_api.RenewMany (contract older than 1.7); this client renews each lease by itself for the next minute");
                            client.renewal_batches.without_renew_many();
                            drop(in_flight);
                            return one_by_one(dues).await;
                        }
                        Err(error) if error.is_transient() => {
                            tracing::debug!(leases = dues.len(), %error, "a renewal of many failed; retrying");
                            last_error = Some(error.to_string());
                            if in_flight.is_empty() {
                                next_start = next_start.min(Instant::now() + retry_pause);
                            }
                        }
                        // Not worth retrying together, and nothing says it
                        // will fail next time: this tick's leases renew
                        // one by one, the next tick's together again.
                        Err(error) => {
                            tracing::warn!(leases = dues.len(), %error, "renewing many leases in one call failed; renewing each by itself this time");
                            drop(in_flight);
                            return one_by_one(dues).await;
                        }
                    }
                }
                () = tokio::time::sleep_until(give_up) => {
                    let now = Instant::now();
                    let running = in_flight.len();
                    let silent = (running > 0).then(|| format!(
                        "{running} renewal attempt(s) got no reply within {} ms",
                        started.elapsed().as_millis()
                    ));
                    let (ended, rest): (Vec<Due>, Vec<Due>) = dues.into_iter().partition(|due| due.give_up <= now);
                    for due in ended {
                        let _ = due.answer.send(Renewal::Unanswered { last_error: last_error.clone().or(silent.clone()) });
                    }
                    dues = rest;
                    if dues.is_empty() {
                        return;
                    }
                }
                () = tokio::time::sleep_until(next_start), if in_flight.len() < MAX_IN_FLIGHT => {
                    let now = Instant::now();
                    if !in_flight.is_empty() {
                        tracing::debug!(leases = dues.len(), "a renewal of many unanswered; trying another connection beside it");
                    }
                    let slot = if std::mem::take(&mut own_free) { Slot::Own } else { Slot::Spare };
                    in_flight.push(attempt(&client, leases(&dues), slot));
                    next_start = now + second_attempt_delay(now, first_give_up(&dues));
                }
            }
        }
    }
    .boxed()
}

/// How long a call's attempt started now waits alone before a second one
/// joins it: as a single renewal's (see `hedged_renew`), but never within
/// the lock bound of the call it doubles, which would only queue behind
/// the rows the first attempt holds while it waits (see the module).
fn second_attempt_delay(now: Instant, give_up: Instant) -> Duration {
    hedge_delay(now, give_up).max(ROW_WAIT_BOUND + ANSWER_MARGIN)
}

/// What one call answered, the leases as it renewed them, and which of the
/// group's two attempts it was.
type Attempt = (
    Result<(std::collections::HashMap<String, Renew>, Instant), super::Error>,
    Slot,
);

async fn attempt(client: &Client, leases: Vec<Lease>, slot: Slot) -> Attempt {
    let _spare = slot.take(client).await;
    (client.renew_many_timed(&leases).await, slot)
}

fn leases(dues: &[Due]) -> Vec<Lease> {
    dues.iter().map(|due| due.lease.clone()).collect()
}

fn first_give_up(dues: &[Due]) -> Instant {
    dues.iter().map(|due| due.give_up).min().unwrap_or_else(Instant::now)
}

/// Tells each guard what the call answered for its key.
fn answer_each(dues: Vec<Due>, answers: &std::collections::HashMap<String, Renew>, sent_at: Instant) {
    for due in dues {
        let renewal = match answers.get(due.lease.key()) {
            Some(Renew::Renewed { until }) => {
                let mut lease = due.lease;
                lease.renewed(*until, sent_at);
                Renewal::Renewed(lease)
            }
            Some(Renew::Lost) => Renewal::Lost(()),
            None => Renewal::Failed(super::Error::UnexpectedReply {
                procedure: super::contract::Procedure::RenewMany.name(),
                detail: format!("no row for the key {:?}", due.lease.key()),
            }),
        };
        let _ = due.answer.send(renewal);
    }
}

/// Each lease renewed by itself, all at once, each by its own give-up: a
/// lease whose row another session holds waits for it alone, and never
/// holds up one whose row is free (the renewals pool and its bound on
/// connections are what limit the load).
async fn one_by_one(dues: Vec<Due>) {
    futures_util::future::join_all(dues.into_iter().map(renew_alone)).await;
}

/// One lease renewed by itself with `Renew`, hedged.
async fn renew_alone(due: Due) {
    let renewal = hedged_renew::renew_hedged(&due.client, &due.lease, due.give_up, due.retry_pause).await;
    let _ = due.answer.send(renewal);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn renewals_due_in_one_tick_are_sent_at_its_start_and_never_more_than_a_tick_early() {
        let batches = RenewalBatches::new();
        let epoch = batches.epoch;
        let period = Duration::from_secs(10);
        let ms = Duration::from_millis;
        let a = batches.tick_of(epoch + ms(5_100), period);
        let b = batches.tick_of(epoch + ms(5_900), period);
        assert_eq!(a, epoch + ms(5_000));
        assert_eq!(a, b, "due in the same tick, sent together");
        assert_eq!(batches.tick_of(epoch + ms(6_000), period), epoch + ms(6_000));
        // A lease too short for a second's tick: a quarter of its period.
        let short = Duration::from_millis(400);
        assert_eq!(batches.tick_of(epoch + ms(1_150), short), epoch + ms(1_100));
        for due in [ms(0), ms(999), ms(123_456)] {
            let sent = batches.tick_of(epoch + due, period);
            assert!(sent <= epoch + due && epoch + due - sent < TICK, "{due:?}");
        }
    }

    fn dues(client: &Client, give_up: Instant, keys: &[&str]) -> (Vec<Due>, Vec<oneshot::Receiver<Renewal>>) {
        keys.iter()
            .map(|key| {
                let (answer, answered) = oneshot::channel();
                let due = Due {
                    client: client.clone(),
                    lease: Lease::for_test_key(key, Duration::from_secs(30)),
                    give_up,
                    retry_pause: Duration::from_millis(200),
                    answer,
                };
                (due, answered)
            })
            .unzip()
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_of_many_unanswered_is_sent_again_beside_itself_on_the_spare_after_a_quarter_of_the_time_left() {
        // Each attempt waits a minute for a connection: it neither answers
        // nor fails while the test looks.
        let client = Client::unreachable(Duration::from_secs(60));
        let give_up = Instant::now() + Duration::from_secs(8);
        let hedge = second_attempt_delay(Instant::now(), give_up);
        let (group, _answers) = dues(&client, give_up, &["a", "b", "c"]);
        let before = client.requests_sent();
        let renewal = tokio::spawn(renew_group(group));
        tokio::time::sleep(hedge - Duration::from_millis(100)).await;
        assert_eq!(client.requests_sent() - before, 1, "one call for the three leases");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(client.requests_sent() - before, 2, "the same call again beside it");
        assert!(
            client.renewal_spare.try_acquire().is_err(),
            "the second call holds the client's spare"
        );
        renewal.abort();
        let _ = renewal.await;
    }

    /// Renews three leases on a server that answers every call with error
    /// `number`, and says whether the client renews one by one from then on.
    async fn one_by_one_after(number: u32, message: &'static str) -> bool {
        use crate::ClientConfig;
        use crate::connection::ConnectionString;
        use crate::connection::stand_in::{Answer, StandIn};
        let stand_in = StandIn::start(Answer::FailEachRequest { number, message }).await;
        let config =
            ClientConfig::new(ConnectionString::parse(&stand_in.ado("User ID=u;Password=p;Database=app")).unwrap());
        let client = Client::connect_with(config).await.unwrap();
        let (group, answers) = dues(&client, Instant::now() + Duration::from_secs(20), &["a", "b", "c"]);
        renew_group(group).await;
        for answered in answers {
            assert!(
                matches!(answered.await.unwrap(), Renewal::Failed(_)),
                "each lease renewed by itself, and failed as alone"
            );
        }
        client.renewal_batches.one_by_one()
    }

    #[tokio::test]
    async fn only_a_database_without_renew_many_turns_renewing_together_off() {
        assert!(
            one_by_one_after(2812, "Could not find stored procedure 'fence_api.RenewMany'.").await,
            "a database older than contract 1.7"
        );
        assert!(
            !one_by_one_after(8114, "Error converting data type nvarchar to bigint.").await,
            "an error of one call turned renewing together off"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_database_without_renew_many_is_asked_again_after_a_minute() {
        let batches = RenewalBatches::new();
        batches.without_renew_many();
        assert!(batches.one_by_one());
        tokio::time::advance(RECHECK_MISSING - Duration::from_millis(1)).await;
        assert!(batches.one_by_one(), "asked again too soon");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            !batches.one_by_one(),
            "a deploy of contract 1.7 is never taken up by a client that found RenewMany missing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_server_every_lease_of_a_group_is_given_up_at_its_own_deadline() {
        let client = Client::unreachable(Duration::from_millis(100));
        let now = Instant::now();
        let mut answers = Vec::new();
        let mut dues = Vec::new();
        for (i, after) in [3u64, 6].into_iter().enumerate() {
            let (answer, answered) = oneshot::channel();
            dues.push(Due {
                client: client.clone(),
                lease: Lease::for_test_key(&format!("k{i}"), Duration::from_secs(30)),
                give_up: now + Duration::from_secs(after),
                retry_pause: Duration::from_millis(200),
                answer,
            });
            answers.push(answered);
        }
        let group = tokio::spawn(renew_group(dues));
        let mut given_up = Vec::new();
        for answered in answers {
            match answered.await.unwrap() {
                Renewal::Unanswered {
                    last_error: Some(error),
                } => assert!(error.contains("no connection"), "{error}"),
                _ => panic!("expected Unanswered with the connection's error"),
            }
            given_up.push(Instant::now() - now);
        }
        assert_eq!(given_up, [Duration::from_secs(3), Duration::from_secs(6)]);
        group.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn leases_renewed_each_by_itself_all_start_at_once_and_none_waits_past_its_own_give_up_for_another() {
        // Every attempt waits a minute for a connection, as a renewal
        // behind a row another session holds waits for it.
        let client = Client::unreachable(Duration::from_secs(60));
        let now = Instant::now();
        let (mut group, _blocked) = dues(
            &client,
            now + Duration::from_secs(10),
            &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
        );
        let (short, mut answered) = dues(&client, now + Duration::from_secs(2), &["short"]);
        group.extend(short);
        let renewals = tokio::spawn(one_by_one(group));
        let renewal = tokio::time::timeout(Duration::from_secs(3), answered.remove(0)).await;
        assert!(
            matches!(renewal, Ok(Ok(Renewal::Unanswered { .. }))),
            "a lease queued behind ten others was not given up by its own deadline"
        );
        assert_eq!(Instant::now() - now, Duration::from_secs(2));
        renewals.abort();
        let _ = renewals.await;
    }
}
