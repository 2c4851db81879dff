//! `fence_admin.ForceRelease`: the operator's lever for a stuck holder. It
//! raises the generation and clears the lease, so the holder's next renew,
//! publish or fenced transaction is refused and the next acquirer gets the
//! lease at once.

use super::Admin;
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::span::About;
use crate::client::{Error, input};

/// What `ForceRelease` answered.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForceRelease {
    /// The holder, if any, is fenced out: the resource is free at this new
    /// generation, which nobody holds.
    Fenced {
        /// The new generation.
        generation: i64,
    },
    /// No fence row exists for the key; nothing changed.
    NotProvisioned,
}

impl ForceRelease {
    /// The contract's name of the outcome: `Fenced` or `NotProvisioned`.
    pub fn name(&self) -> &'static str {
        match self {
            ForceRelease::Fenced { .. } => "Fenced",
            ForceRelease::NotProvisioned => "NotProvisioned",
        }
    }
}

impl Admin {
    /// Fences out the current holder of `key`. Behind a holder whose
    /// transaction stays open (a frozen process, a client that never
    /// commits) the procedure waits at most 5 seconds for the fence row and
    /// fails ([`Error::Server`] 50129, or the engine's lock time-out);
    /// [`force_release_watched`](Admin::force_release_watched) names the
    /// session that blocks it, and can end it. Needs `fence_operator`.
    pub async fn force_release(&self, key: &str) -> Result<ForceRelease, Error> {
        let key = input::key(key)?;
        let reply = self
            .client
            .call(Procedure::ForceRelease, &[&key], About::key(key))
            .await?;
        force_release(&reply)
    }
}

pub(super) fn force_release(reply: &Reply) -> Result<ForceRelease, Error> {
    match reply.outcome()? {
        "Fenced" => Ok(ForceRelease::Fenced {
            generation: reply.required("Generation")?,
        }),
        "NotProvisioned" => Ok(ForceRelease::NotProvisioned),
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{big, reply, text};
    use super::*;

    #[test]
    fn fenced_carries_the_new_generation_and_a_missing_key_none() {
        let fenced = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Fenced")), big("Generation", Some(8))],
        );
        assert_eq!(force_release(&fenced).unwrap(), ForceRelease::Fenced { generation: 8 });
        let missing = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("NotProvisioned")), big("Generation", None)],
        );
        assert_eq!(force_release(&missing).unwrap(), ForceRelease::NotProvisioned);
        assert_eq!(
            [
                ForceRelease::Fenced { generation: 8 }.name(),
                ForceRelease::NotProvisioned.name()
            ],
            ["Fenced", "NotProvisioned"]
        );
    }

    #[test]
    fn fenced_without_a_generation_or_an_unknown_outcome_is_outside_the_contract() {
        let nameless = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Fenced")), big("Generation", None)],
        );
        assert!(matches!(force_release(&nameless), Err(Error::UnexpectedReply { .. })));
        let unknown = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Evicted")), big("Generation", Some(1))],
        );
        let error = force_release(&unknown).unwrap_err();
        assert!(error.to_string().contains("unknown outcome 'Evicted'"), "{error}");
    }
}
