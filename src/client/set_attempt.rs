//! A set acquire run to its end on a task of its own, as a single acquire's
//! attempt is (see `wait.rs`): a caller that stops waiting for it (a timeout
//! around `acquire_set`, a `select!` at shutdown) must not leave its keys
//! held by an owner nobody knows. A request the client stopped reading goes
//! on on the server (Babelfish reads no Attention in the middle of a
//! request), and a set acquire waiting for a row another transaction holds
//! is granted when that row is let go. The task reads the answer whatever
//! the caller does and gives back a set granted to a caller that is gone.

use std::future::Future;

use tokio::sync::oneshot;
use tracing::Instrument;

use super::contract::Procedure;
use super::set_outcome::AcquireSet;
use super::{Client, Error, LeaseSet};

type SetOutcome = Result<AcquireSet, Error>;

impl Client {
    /// Runs `attempt` on a task of its own and answers what it answers; a
    /// set it grants after its caller is gone is released.
    pub(crate) async fn acquire_set_to_its_end(
        &self,
        attempt: impl Future<Output = SetOutcome> + Send + 'static,
    ) -> SetOutcome {
        let (answer, answered) = oneshot::channel();
        let client = self.clone();
        let task = async move {
            if let Err(Ok(AcquireSet::Acquired(set))) = answer.send(attempt.await) {
                client.release_set_of_nobody(&set).await;
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
                _ => Err(Error::Network {
                    procedure: Procedure::AcquireSet.name(),
                    reason: "the set acquire's task was cancelled before it answered (its runtime is shutting down)"
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

/// The answer of a set attempt running on its own task, until its caller
/// takes it. A caller dropped after the task answered but before it took
/// the answer would drop a granted set with it: dropped unclaimed, it
/// closes the channel (so a task still running releases what it is
/// granted) and releases a set already sent.
struct Unclaimed {
    answer: Option<oneshot::Receiver<SetOutcome>>,
    client: Client,
}

impl Unclaimed {
    /// Waits for the answer and claims it.
    async fn take(&mut self) -> Result<SetOutcome, oneshot::error::RecvError> {
        let Some(answer) = self.answer.as_mut() else {
            unreachable!("a set attempt's answer is taken once");
        };
        let outcome = answer.await;
        self.answer = None;
        outcome
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        let Some(mut answer) = self.answer.take() else {
            return;
        };
        answer.close();
        if let Ok(Ok(AcquireSet::Acquired(set))) = answer.try_recv() {
            let client = self.client.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { client.release_set_of_nobody(&set).await });
            }
        }
    }
}
