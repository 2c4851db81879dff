//! The behaviours whose schedule acts on every key of the database
//! (Recover, PruneTenure) or needs what a client cannot do (restore a
//! backup, a million keys). The selftest never runs them on a user's
//! database; each is listed so the report says what was not shown, and why.

use crate::selftest::check::{Check, Verdict};

const WHY: &str = "Recover and PruneTenure act on every key of the database: the selftest never runs them on \
                   your data, and a scratch database of its own is not built yet";

pub(crate) const RECOVER_BEHIND_OPEN_TRANSACTION: Check = Check {
    name: "recover_behind_open_transaction",
    behaviour: "Recover waits for a caller holding fence rows, lets other keys' calls through between its tries, \
                and answers 50129 after about 5 s",
    document: "engines.md row 2; B6, B7",
    expected: "S1's AssertHolder of another key Holding while Recover waits; Recovered after S1 commits; S3's \
               Renew of another key Renewed within about 250 ms",
    run: |_| Box::pin(async { Ok(Verdict::skipped(WHY)) }),
};

pub(crate) const PROVISION_BESIDE_RECOVER: Check = Check {
    name: "provision_beside_recover",
    behaviour: "a first Provision inside a caller's transaction that holds a fence row, while Recover runs",
    document: "contract: Inside your own transaction (Provision outside your transaction); B9",
    expected: "the documented deadlock (1205 or 50127) for the caller, never a lost fence",
    run: |_| Box::pin(async { Ok(Verdict::skipped(WHY)) }),
};

pub(crate) const PRUNE_BELOW_ESCALATION: Check = Check {
    name: "prune_below_lock_escalation",
    behaviour: "PruneTenure's batches of 4,000 never escalate to a table lock",
    document: "engines.md row 6; B12",
    expected: "no OBJECT X lock on fence.Tenure while PruneTenure runs",
    run: |_| Box::pin(async { Ok(Verdict::skipped(WHY)) }),
};
