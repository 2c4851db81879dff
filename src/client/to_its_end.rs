//! An acquire attempt (of one key, a set or a slot) run to its end on a task
//! of its own: a caller that stops waiting for it (a timeout around the
//! call, a `select!` at shutdown) must not leave what it was granted held
//! by an owner nobody knows. A request the client
//! stopped reading goes on on the server (Babelfish reads no Attention in
//! the middle of a request), and an acquire waiting for a row another
//! transaction holds is granted when that row is let go. The task reads the
//! answer whatever the caller does and gives back a grant made to a caller
//! that is gone.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::oneshot;
use tracing::Instrument;

use tokio::time::Instant;

use super::contract::Procedure;
use super::handover::Woke;
use super::queue::{Place, Queued};
use super::set_outcome::AcquireSet;
use super::slot::AcquireSlot;
use super::{Acquire, Client, Error, LeaseSet};

/// A grant given back for a caller that is gone.
type GiveBack = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What an attempt answers: what it granted, if anything, is given back
/// when its caller is gone.
pub(crate) trait Claimable: Sized + Send + 'static {
    /// The release of what this answer granted; `None` when it granted
    /// nothing.
    fn give_back(self, client: Client) -> Option<GiveBack>;

    /// The answer of an attempt whose task ended before it answered.
    fn cancelled(error: Error) -> Self;
}

impl Client {
    /// Runs `attempt`, an acquire of `procedure`, on a task of its own and
    /// answers what it answers; what it grants after its caller is gone is
    /// given back.
    pub(crate) async fn to_its_end<T: Claimable>(
        &self,
        procedure: Procedure,
        attempt: impl Future<Output = T> + Send + 'static,
    ) -> T {
        let (answer, answered) = oneshot::channel();
        let client = self.clone();
        let task = async move {
            if let Err(unclaimed) = answer.send(attempt.await)
                && let Some(give_back) = unclaimed.give_back(client)
            {
                give_back.await;
            }
        };
        let running = tokio::spawn(task.instrument(tracing::Span::current()));
        let mut answered = Unclaimed {
            answer: Some(answered),
            client: self.clone(),
        };
        match answered.take().await {
            Ok(outcome) => outcome,
            // The task ended without an answer: it panicked, and so does
            // this; or its runtime is shutting down, and the attempt may
            // have reached the server, as after a lost reply.
            Err(_) => match running.await {
                Err(ended) if ended.is_panic() => std::panic::resume_unwind(ended.into_panic()),
                _ => T::cancelled(Error::Network {
                    procedure: procedure.name(),
                    reason: "the acquire's task was cancelled before it answered (its runtime is shutting down)"
                        .to_string(),
                    timed_out: false,
                }),
            },
        }
    }

    /// Gives back a set granted to a caller that is gone, within the
    /// release timeout; a set not given back runs out at its lease's end.
    async fn release_set_of_nobody(&self, set: &LeaseSet) {
        tracing::debug!(owner = %set.owner(), "a set acquire whose caller is gone was granted; releasing it");
        let timeout = self.config.release_timeout;
        match tokio::time::timeout(timeout, self.release_set(set)).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(
                owner = %set.owner(),
                %error,
                "release of a set nobody waits for failed; its leases will expire on their own"
            ),
            Err(_) => tracing::warn!(
                owner = %set.owner(),
                timeout_ms = timeout.as_millis() as u64,
                "release of a set nobody waits for did not finish in time; its leases will expire on their own"
            ),
        }
    }
}

impl Claimable for Result<(Acquire, Instant, Option<Woke>), Error> {
    fn give_back(self, client: Client) -> Option<GiveBack> {
        let Ok((Acquire::Acquired(lease), ..)) = self else {
            return None;
        };
        tracing::debug!(
            key = lease.key(),
            "an acquire whose caller is gone was granted; releasing it"
        );
        Some(Box::pin(async move {
            client.release_quietly(&lease).await;
        }))
    }

    fn cancelled(error: Error) -> Self {
        Err(error)
    }
}

impl Claimable for Queued {
    fn give_back(self, client: Client) -> Option<GiveBack> {
        // The place is dropped here: a caller that is gone holds no queue.
        self.answer.give_back(client)
    }

    fn cancelled(error: Error) -> Self {
        Queued {
            answer: Err(error),
            place: Place::default(),
        }
    }
}

impl Claimable for Result<AcquireSet, Error> {
    fn give_back(self, client: Client) -> Option<GiveBack> {
        let Ok(AcquireSet::Acquired(set)) = self else {
            return None;
        };
        Some(Box::pin(async move { client.release_set_of_nobody(&set).await }))
    }

    fn cancelled(error: Error) -> Self {
        Err(error)
    }
}

impl Claimable for Result<AcquireSlot, Error> {
    fn give_back(self, client: Client) -> Option<GiveBack> {
        let Ok(AcquireSlot::Acquired { lease, .. }) = self else {
            return None;
        };
        tracing::debug!(
            key = lease.key(),
            "a slot acquire whose caller is gone was granted; releasing it"
        );
        Some(Box::pin(async move {
            client.release_quietly(&lease).await;
        }))
    }

    fn cancelled(error: Error) -> Self {
        Err(error)
    }
}

/// The answer of an attempt running on its own task, until its caller takes
/// it. A caller dropped after the task answered but before it took the
/// answer would drop a grant with it: dropped unclaimed, it closes the
/// channel (so a task still running gives back what it is granted) and
/// gives back a grant already sent.
struct Unclaimed<T: Claimable> {
    answer: Option<oneshot::Receiver<T>>,
    client: Client,
}

impl<T: Claimable> Unclaimed<T> {
    /// Waits for the answer and claims it.
    async fn take(&mut self) -> Result<T, oneshot::error::RecvError> {
        let Some(answer) = self.answer.as_mut() else {
            unreachable!("an attempt's answer is taken once");
        };
        let outcome = answer.await;
        self.answer = None;
        outcome
    }
}

impl<T: Claimable> Drop for Unclaimed<T> {
    fn drop(&mut self) {
        let Some(mut answer) = self.answer.take() else {
            return;
        };
        answer.close();
        if let Ok(sent) = answer.try_recv()
            && let Some(give_back) = sent.give_back(self.client.clone())
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(give_back);
        }
    }
}
