//! A guard's last call on the session that holds its handover signal, so
//! that the same request gives the lease back and lets go of the signal.
//!
//! Without it a waiter blocked on the signal wakes only after the release has
//! answered and the client has sent one more request to let go of the lock:
//! a round trip and a lock release after the lease was free. Made on the
//! holder session, the release commits, then the lock is let go of within the
//! same batch, and the engine wakes the waiter before the releasing caller
//! even reads its answer; the waiter's own request then asks `Acquire`.
//!
//! The lock is let go of whatever the fence answered: after `Released`, and
//! also after `NotHolder` or a publish refused for a lease that is no longer
//! this guard's, the guard has nothing left for its signal to guard (a
//! versioned publish refused as `StaleSource` still holds the lease until the
//! guard releases it in the background: its waiters find it busy and wait on
//! as behind a holder without a signal). A call that failed lets go of
//! nothing known: the session is closed and the task raises the signals
//! still wanted on a new one.

use tiberius::ToSql;
use tokio::sync::oneshot;

use super::Client;
use super::call::{Reply, batch_on};
use super::contract::Procedure;
use super::error::Error;
use super::pool::{Manager, Session};
use super::span::About;

type Pooled = bb8::PooledConnection<'static, Manager>;

/// A holder session lent for one call. Dropped unused (the call's input was
/// refused first), it goes back as it came. Dropped after its request was
/// sent and before the answer (the call's future was dropped), the session
/// is marked for closing, which lets go of every lock it holds, and its task
/// raises the others again.
pub(crate) struct Loan {
    session: Option<Pooled>,
    resource: std::sync::Arc<str>,
    back: Option<oneshot::Sender<Returned>>,
    sent: bool,
}

/// A lent session coming back to its task.
pub(crate) struct Returned {
    pub(crate) session: Pooled,
    pub(crate) after: After,
}

/// What the lent session did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Nothing: the call was never sent.
    Unused,
    /// The call answered, so its batch let go of the signal.
    LetGo,
    /// The call failed: what the session still holds is unknown.
    Failed,
}

impl Loan {
    pub(crate) fn new(session: Pooled, resource: std::sync::Arc<str>, back: oneshot::Sender<Returned>) -> Loan {
        Loan {
            session: Some(session),
            resource,
            back: Some(back),
            sent: false,
        }
    }

    /// The session, for a loan that was never used.
    pub(crate) fn into_session(mut self) -> Option<Pooled> {
        self.session.take()
    }

    fn give_back(&mut self, after: After) {
        if let (Some(mut session), Some(back)) = (self.session.take(), self.back.take()) {
            // Marked for closing until its task takes it back and says what
            // it holds: a task that stopped waiting for it (gone, or past its
            // bound) drops it, and the pool must close a session that may
            // still hold the other guards' signals, not keep it.
            session.in_call = true;
            let _ = back.send(Returned { session, after });
        }
    }
}

impl std::fmt::Debug for Loan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan")
            .field("resource", &self.resource)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        if !self.sent {
            self.give_back(After::Unused);
        } else if let Some(mut session) = self.session.take() {
            session.in_call = true;
        }
    }
}

/// `procedure`'s statement for `count` arguments, then the release of the
/// signal named by the argument after them, if the session holds it: letting
/// go of a lock not held is an error that ends the batch (on SQL Server and
/// on Babelfish alike), which would turn a release that committed into a
/// failure, and a publish into an unknown outcome.
fn letting_go_after(procedure: Procedure, count: usize) -> String {
    let signal = count + 1;
    format!(
        "{};\nIF APPLOCK_MODE(N'public', @P{signal}, N'Session') <> N'NoLock' \
         EXEC sp_releaseapplock @Resource = @P{signal}, @LockOwner = N'Session';",
        procedure.statement_for(count),
    )
}

impl Client {
    /// Calls `procedure`, a guard's last call for its lease, and answers its
    /// one row: on the session `loan` lent, letting go of its signal in the
    /// same request; without a loan, as any call.
    pub(crate) async fn last_call(
        &self,
        procedure: Procedure,
        arguments: &[&dyn ToSql],
        about: About<'_>,
        loan: Option<Loan>,
    ) -> Result<Reply, Error> {
        let Some(mut loan) = loan else {
            return self.call(procedure, arguments, about).await;
        };
        let statement = letting_go_after(procedure, arguments.len());
        let resource = loan.resource.to_string();
        let mut bound: Vec<&dyn ToSql> = arguments.to_vec();
        bound.push(&resource);
        loan.sent = true;
        let answer = match loan.session.as_mut() {
            Some(session) => {
                let session: &mut Session = session;
                let exchange = Box::pin(batch_on(session, &self.config, procedure, &statement, &bound, Some(1)));
                self.observed(procedure, about, exchange).await
            }
            None => Err(Error::UnexpectedReply {
                procedure: procedure.name(),
                detail: "a lent session was already given back".into(),
            }),
        };
        loan.give_back(if answer.is_ok() { After::LetGo } else { After::Failed });
        answer.map(|mut rows| rows.swap_remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signal_is_let_go_of_after_the_call_in_the_same_batch() {
        let sql = letting_go_after(Procedure::Release, 3);
        let call = sql.find("EXEC fence_api.Release").expect(&sql);
        let let_go = sql
            .find("sp_releaseapplock @Resource = @P4, @LockOwner = N'Session'")
            .expect(&sql);
        assert!(call < let_go, "{sql}");
        let only_if_held = sql
            .find("IF APPLOCK_MODE(N'public', @P4, N'Session') <> N'NoLock'")
            .expect(&sql);
        assert!(call < only_if_held && only_if_held < let_go, "{sql}");
    }
}
