//! A fenced transaction on the fake (feature `fake`): the lease is asserted
//! on the model at the begin and again at the commit, the work's statements
//! are recorded, not run, and a rollback puts back what the begin's assert
//! changed (the key's source version).

use std::time::Duration;

use tiberius::ToSql;

use super::{BeginFenced, Claim, FencedTx, batches::Engine, failed_before_commit, refused_or};
use crate::client::fake::{Fake, RaisedVersion, WriteEnd};
use crate::client::{Client, Error, Lease, Procedure, input};
use crate::model::{Answer, Call, Session};

/// The fake's side of an open fenced transaction.
pub(crate) struct FakeTx {
    fake: Fake,
    /// Its record in the fake.
    write: usize,
    /// The key's source version before the begin's assert, for a rollback.
    restore: Option<RaisedVersion>,
    /// The source version the begin asserted, which the commit asserts
    /// again (the server's commit batch reads it from the session).
    source_version: Option<i64>,
    /// Set once it committed or rolled back.
    ended: bool,
}

impl std::fmt::Debug for FakeTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeTx")
            .field("write", &self.write)
            .finish_non_exhaustive()
    }
}

fn assert_holder(lease: &Lease, source_version: Option<i64>) -> Call {
    Call::AssertHolder {
        resource_key: Some(lease.key().to_string()),
        owner: Some(lease.owner()),
        generation: Some(lease.generation()),
        source_version,
    }
}

/// Begins a fenced transaction on `fake`: the guard's renewals are held
/// back as on a server, then the lease is asserted inside the transaction.
pub(super) async fn begin<'c>(
    client: &'c Client,
    fake: &Fake,
    lease: &Lease,
    mut claim: Option<Claim>,
    source_version: Option<i64>,
) -> Result<BeginFenced<'c>, Error> {
    input::key(lease.key())?;
    let source_version = input::source_version(source_version)?;
    let timeout = client.config.call_timeout;
    let renewed;
    let lease = match claim.as_mut() {
        Some(claim) => {
            renewed = claim.hold_renewals().await;
            &renewed
        }
        None => lease,
    };
    let call = assert_holder(lease, source_version);
    let exchange = fake
        .exchange(timeout, Procedure::AssertHolder, &call, Session::InTransaction)
        .await;
    let restore = exchange.source_version_before;
    if let Some(error) = exchange.failed {
        // A reply lost after the assert: the server's transaction is open
        // on a connection the client gives up, which rolls it back.
        if let Some(Ok(_)) = exchange.ran {
            let write = fake.begin_write(lease.key(), lease.generation());
            fake.end_write(write, WriteEnd::RolledBack, restore);
        }
        return refused_or(error.server_number(), || error);
    }
    match exchange.ran.expect("a call that did not fail ran") {
        Ok(Answer::AssertHolder(_)) => {}
        Ok(other) => {
            return Err(Error::UnexpectedReply {
                procedure: Procedure::AssertHolder.name(),
                detail: format!("the fake answered {other:?}"),
            });
        }
        Err(refused) => {
            return refused_or(Some(refused.number), || {
                Error::from_server(
                    Procedure::AssertHolder.name(),
                    refused.number,
                    16,
                    refused.message.to_string(),
                )
            });
        }
    }
    let write = fake.begin_write(lease.key(), lease.generation());
    let mut tx = FencedTx::open(None, lease, timeout, Engine::SqlServer, claim);
    tx.fake = Some(Box::new(FakeTx {
        fake: fake.clone(),
        write,
        restore,
        source_version,
        ended: false,
    }));
    Ok(BeginFenced::Holding(tx))
}

/// A scripted error the commit batch's CATCH would catch: one of class 19
/// or less, which does not end the session (a fatal one does, and no CATCH
/// sees it).
fn caught_before_commit(error: &Error) -> Option<(u32, &str)> {
    match error {
        Error::Server {
            number, class, message, ..
        } if *class < 20 => Some((*number, message)),
        Error::Rejected { number, message, .. } => Some((*number, message)),
        _ => None,
    }
}

impl FakeTx {
    /// Records a statement of the work; it writes no rows.
    pub(super) fn record(&self, sql: &str, params: &[&dyn ToSql]) {
        self.fake.record_statement(self.write, sql, params);
    }

    /// The commit: the lease asserted once more, then the record ends as
    /// committed, or rolled back with the refusal or error the client sees.
    pub(super) async fn commit(mut self: Box<Self>, timeout: Duration, lease: &Lease) -> Result<(), Error> {
        let call = assert_holder(lease, self.source_version);
        let exchange = self
            .fake
            .exchange(timeout, Procedure::AssertHolder, &call, Session::InTransaction)
            .await;
        self.ended = true;
        let committed = matches!(exchange.ran, Some(Ok(_)));
        if let Some(error) = exchange.failed {
            let end = if committed {
                WriteEnd::Committed
            } else {
                WriteEnd::RolledBack
            };
            self.fake.end_write(self.write, end, self.restore);
            // The server's batch catches an error before its COMMIT and
            // answers it as a row; only what ends the session or loses the
            // answer leaves the outcome in doubt.
            return Err(match caught_before_commit(&error) {
                Some((number, message)) => failed_before_commit(number, message),
                None => Error::CommitUnknown {
                    reason: error.to_string(),
                },
            });
        }
        match exchange.ran.expect("a call that did not fail ran") {
            Ok(_) => {
                self.fake.end_write(self.write, WriteEnd::Committed, self.restore);
                Ok(())
            }
            Err(refused) => {
                self.fake.end_write(self.write, WriteEnd::RolledBack, self.restore);
                Err(failed_before_commit(refused.number, &refused.message))
            }
        }
    }

    /// Rolls back: nothing of the work happened.
    pub(super) fn rollback(mut self) {
        self.ended = true;
        self.fake.end_write(self.write, WriteEnd::RolledBack, self.restore);
    }
}

impl Drop for FakeTx {
    /// A transaction dropped open rolls back, as its closed connection does
    /// on a server.
    fn drop(&mut self) {
        if !self.ended {
            self.fake.end_write(self.write, WriteEnd::RolledBack, self.restore);
        }
    }
}
