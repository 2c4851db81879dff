//! The faults a test scripts into the fake: per procedure, for the next
//! call, for a given call, or for every call until cleared.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::client::Procedure;

/// What goes wrong with one call of the fake.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The request never reaches the fence: nothing changes, and the client
    /// sees the connection fail (for a publish, an outcome it cannot know:
    /// [`Error::OutcomeUnknown`](crate::client::Error::OutcomeUnknown)).
    RequestLost,
    /// The call runs and commits, and its reply is lost: the client sees the
    /// connection fail, as with [`RequestLost`](Fault::RequestLost), but the
    /// change was made. A fenced transaction's commit then answers
    /// [`Error::CommitUnknown`](crate::client::Error::CommitUnknown).
    ReplyLost,
    /// The call waits this long on the tokio clock before it runs; past the
    /// client's call timeout it gives up (nothing changes: the server
    /// stopped the request) and the client sees the time-out.
    Delay(Duration),
    /// The server raises error `number` (class 16) instead of running the
    /// call: nothing changes. A contract number (50100–50199) reads as the
    /// client reads the procedure's own refusal; 1205 is a deadlock. At a
    /// fenced transaction's begin or commit it reads as there: a refusal
    /// (50110, 50111, 50114) is `Refused` or `CommitRefused`, another error
    /// before the commit rolls it back (`TransactionAborted`).
    ServerError(u32),
    /// A fatal error (596, class 21) ends the session before the call runs:
    /// nothing changes. The client cannot tell that from one after the
    /// commit, so a publish's outcome is unknown.
    Fatal,
}

/// The faults scripted so far, and how many calls each procedure has had.
#[derive(Debug, Default)]
pub(super) struct Faults {
    /// Calls made, per procedure.
    calls: BTreeMap<Procedure, u64>,
    /// Faults by procedure and call number (the first call is 1).
    scripted: BTreeMap<(Procedure, u64), Fault>,
    /// Faults every call of a procedure meets.
    every: BTreeMap<Procedure, Fault>,
}

impl Faults {
    /// Counts a call of `procedure` and answers the fault it meets.
    pub(super) fn next(&mut self, procedure: Procedure) -> Option<Fault> {
        let call = self.calls.entry(procedure).or_default();
        *call += 1;
        let call = *call;
        self.scripted
            .remove(&(procedure, call))
            .or_else(|| self.every.get(&procedure).copied())
    }

    pub(super) fn calls(&self, procedure: Procedure) -> u64 {
        self.calls.get(&procedure).copied().unwrap_or(0)
    }

    /// `fault` for the first call of `procedure` to come that has none yet.
    pub(super) fn next_call(&mut self, procedure: Procedure, fault: Fault) {
        let mut call = self.calls(procedure) + 1;
        while self.scripted.contains_key(&(procedure, call)) {
            call += 1;
        }
        self.scripted.insert((procedure, call), fault);
    }

    /// `fault` for the `nth` call of `procedure` from now (1 is the next).
    pub(super) fn call(&mut self, procedure: Procedure, nth: u64, fault: Fault) {
        let call = self.calls(procedure) + nth.max(1);
        self.scripted.insert((procedure, call), fault);
    }

    pub(super) fn every(&mut self, procedure: Procedure, fault: Fault) {
        self.every.insert(procedure, fault);
    }

    pub(super) fn clear(&mut self) {
        self.scripted.clear();
        self.every.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_scripted_for_the_next_calls_queue_and_one_for_a_given_call_waits_for_it() {
        let mut faults = Faults::default();
        faults.next_call(Procedure::Publish, Fault::ReplyLost);
        faults.next_call(Procedure::Publish, Fault::RequestLost);
        faults.call(Procedure::Renew, 2, Fault::Fatal);
        assert_eq!(faults.next(Procedure::Renew), None);
        assert_eq!(faults.next(Procedure::Publish), Some(Fault::ReplyLost));
        assert_eq!(faults.next(Procedure::Publish), Some(Fault::RequestLost));
        assert_eq!(faults.next(Procedure::Publish), None);
        assert_eq!(faults.next(Procedure::Renew), Some(Fault::Fatal));
        faults.every(Procedure::Acquire, Fault::ServerError(1205));
        assert_eq!(faults.next(Procedure::Acquire), Some(Fault::ServerError(1205)));
        assert_eq!(faults.next(Procedure::Acquire), Some(Fault::ServerError(1205)));
        faults.clear();
        assert_eq!(faults.next(Procedure::Acquire), None);
        assert_eq!(faults.calls(Procedure::Acquire), 3);
    }
}
