//! The contract's version: the one this client speaks, the one a database
//! answers (`fence_api.ContractVersion`), and whether the second does for the
//! first.

/// The version of the procedure contract this client speaks, and the oldest
/// one it accepts: a database answering the same major and this minor or a
/// later one (`fence_api.ContractVersion`) holds everything it calls.
///
/// It asks for v1.8, whose lease-set procedures (`fence_api.AcquireSet`
/// and the others) its lease sets call, v1.7, whose `fence_api.RenewMany` renews a guard's lease
/// with the others due at the same time, v1.6, whose `fence_admin.Retire`
/// and `PruneOutcomes` the operators' calls reach, v1.5's `@OperationId` on
/// `fence_admin.ForceRelease` and `fence_admin.ResetSourceVersion` and
/// v1.4's `@SourceVersion`, which the versioned publishes and fenced
/// transactions send: the client and the procedures it deploys are released
/// together.
/// What each version added is in `CHANGELOG.md`.
pub const CONTRACT_VERSION: ContractVersion = ContractVersion { major: 1, minor: 8 };

/// A procedure contract version, as `fence_api.ContractVersion` answers it.
/// Minors add (columns, outcomes, optional parameters, procedures); a major
/// changes meaning. Shown as `v1.1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContractVersion {
    /// Changes of meaning.
    pub major: u32,
    /// Compatible additions.
    pub minor: u32,
}

impl std::fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl ContractVersion {
    /// Whether a database answering `self` holds what a client speaking
    /// `needed` calls: the same major, and a minor at least as new.
    pub fn satisfies(self, needed: ContractVersion) -> bool {
        self.major == needed.major && self.minor >= needed.minor
    }
}

/// The version in `fence_api.ContractVersion`'s one row.
pub(crate) fn read_version(rows: &[tiberius::Row]) -> Option<ContractVersion> {
    let [row] = rows else { return None };
    let column = |name: &str| {
        let index = row.columns().iter().position(|c| c.name().eq_ignore_ascii_case(name))?;
        row.try_get::<i32, _>(index).ok().flatten()
    };
    let outcome_index = row
        .columns()
        .iter()
        .position(|c| c.name().eq_ignore_ascii_case("Outcome"))?;
    if row.try_get::<&str, _>(outcome_index).ok().flatten() != Some("Version") {
        return None;
    }
    Some(ContractVersion {
        major: u32::try_from(column("Major")?).ok()?,
        minor: u32::try_from(column("Minor")?).ok()?,
    })
}

/// Why the deployed version does not do for this client, or `None` when it does.
pub(crate) fn version_problem(deployed: ContractVersion) -> Option<String> {
    if deployed.satisfies(CONTRACT_VERSION) {
        return None;
    }
    let why = if deployed.major != CONTRACT_VERSION.major {
        "a different major version"
    } else {
        "an older minor version"
    };
    Some(format!(
        "the database speaks contract {deployed}, this client needs {CONTRACT_VERSION} ({why})"
    ))
}

/// The deployed contract version, when the procedure that answers it exists
/// (a database older than the procedure gets a "missing" from the catalog
/// check instead of a failed batch).
pub(crate) const VERSION_QUERY: &str = "\
IF OBJECT_ID(N'fence_api.ContractVersion', N'P') IS NOT NULL EXEC fence_api.ContractVersion";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployed_version_is_accepted_with_the_same_major_and_a_minor_as_new() {
        let v = |major, minor| ContractVersion { major, minor };
        let needed = CONTRACT_VERSION;
        assert_eq!(version_problem(needed), None);
        assert_eq!(version_problem(v(needed.major, needed.minor + 1)), None);
        assert_eq!(
            version_problem(v(needed.major + 1, 0)),
            Some(format!(
                "the database speaks contract v{}.0, this client needs {needed} (a different major version)",
                needed.major + 1
            ))
        );
        if needed.minor > 0 {
            let older = v(needed.major, needed.minor - 1);
            assert_eq!(
                version_problem(older),
                Some(format!(
                    "the database speaks contract {older}, this client needs {needed} (an older minor version)"
                ))
            );
        }
    }
}
