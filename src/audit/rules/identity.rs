//! FP019: the database was restored or failed over since its identity was
//! recorded. A restore can take the fence's generations back below ones
//! already handed out, so a holder fenced out before it could publish again
//! until `fencepost lease recover` raises every generation.

use crate::identity::{CANNOT_VERIFY_REASON, IdentityState, RESTORED_MESSAGE, compare};

use super::{CannotVerify, Context, Finding, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let cannot_verify = |reason: &str| CannotVerify {
        rule: Rule::DatabaseIdentity,
        reason: reason.to_owned(),
    };
    let Some(reading) = ctx.catalog.database_identity else {
        report.cannot_verify.push(cannot_verify(
            "the database identity (sys.database_recovery_status, fence.DatabaseIdentity) could not be read",
        ));
        return;
    };
    match compare(reading.recorded, reading.current) {
        IdentityState::Matches => {}
        IdentityState::NotRecorded => report.cannot_verify.push(cannot_verify(
            "no database identity is recorded (fence.DatabaseIdentity is empty): `fencepost migrate` records it",
        )),
        IdentityState::CannotVerify => report.cannot_verify.push(cannot_verify(CANNOT_VERIFY_REASON)),
        IdentityState::Changed { recorded, current } => report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::DatabaseIdentity,
            principal: None,
            object: ctx.catalog.database.clone(),
            permission: None,
            why: format!("{RESTORED_MESSAGE} (recorded recovery fork {recorded}, now {current})"),
            fix: "fencepost lease recover".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::audit::{Catalog, IdentityReading, Policy, RuleOutcome};

    /// The rule alone: the other rules have their own fixtures.
    fn report(reading: Option<IdentityReading>) -> Report {
        let catalog = Catalog {
            database: "orders".into(),
            database_identity: reading,
            ..Catalog::default()
        };
        let policy = Policy::default();
        let mut report = Report::default();
        check(&Context::new(&catalog, &policy), &mut report);
        report
    }

    fn reading(recorded: Option<u128>, current: Option<u128>) -> Option<IdentityReading> {
        Some(IdentityReading {
            recorded: recorded.map(Uuid::from_u128),
            current: current.map(Uuid::from_u128),
        })
    }

    #[test]
    fn a_matching_identity_passes() {
        assert_eq!(
            report(reading(Some(1), Some(1))).outcome(Rule::DatabaseIdentity),
            RuleOutcome::Passed
        );
    }

    #[test]
    fn a_changed_identity_is_a_finding_that_says_to_recover() {
        let report = report(reading(Some(1), Some(2)));
        let finding = report.findings_of(Rule::DatabaseIdentity).next().expect("a finding");
        assert_eq!(finding.object, "orders");
        assert!(finding.why.starts_with(RESTORED_MESSAGE), "{}", finding.why);
        assert!(finding.why.contains(&Uuid::from_u128(2).to_string()), "{}", finding.why);
        assert_eq!(finding.fix, "fencepost lease recover");
    }

    #[test]
    fn an_engine_without_a_recovery_fork_cannot_verify() {
        let report = report(reading(Some(1), None));
        let reason: Vec<&str> = report
            .cannot_verify_of(Rule::DatabaseIdentity)
            .map(|c| c.reason.as_str())
            .collect();
        assert_eq!(reason, [CANNOT_VERIFY_REASON]);
        assert_eq!(report.findings_of(Rule::DatabaseIdentity).count(), 0);
    }

    #[test]
    fn nothing_recorded_or_nothing_read_cannot_verify() {
        for reading in [reading(None, Some(1)), None] {
            assert_eq!(
                report(reading).outcome(Rule::DatabaseIdentity),
                RuleOutcome::CannotVerify,
                "{reading:?}"
            );
        }
    }
}
