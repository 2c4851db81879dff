//! The parameters of the procedure contract, named as the procedures name
//! them, and the parameter each documented error number is about.

/// A parameter of the procedure contract, named as the procedures name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Parameter {
    /// `@ResourceKey`: 1 to 256 UTF-16 code units, not ending in a space.
    ResourceKey,
    /// `@Owner`: a non-nil id, fresh for each acquisition.
    Owner,
    /// `@LeaseSeconds`: whole seconds from 1 to 86400.
    LeaseSeconds,
    /// `@Generation`: a generation returned by `Acquire` (1 or more).
    Generation,
    /// `@OperationId`: a non-nil id, fresh for each publish or operator
    /// command (`fence_admin.ForceRelease`, `ResetSourceVersion`: contract
    /// v1.5), reused only to replay it.
    OperationId,
    /// `@Payload`: any text, never NULL.
    Payload,
    /// `@Release` of `Publish`: 0 or 1, never NULL.
    Release,
    /// `@SourceVersion` of `Publish` and `AssertHolder` (contract v1.4): 0
    /// or more; of `fence_admin.ResetSourceVersion`, 0 or more or NULL.
    SourceVersion,
    /// `@Prefix` of `fence_admin.ListLeases`: any text, never NULL (empty
    /// lists every resource).
    Prefix,
    /// `@HeldOnly` of `fence_admin.ListLeases`: 0 or 1, never NULL.
    HeldOnly,
    /// `@MaxRows` of `fence_admin.ListLeases` and `LeaseHistory`: 1 to 100000.
    MaxRows,
    /// `@After` of `fence_admin.ListLeases`: the last key of the previous page.
    After,
    /// `@OlderThanDays` of `fence_admin.PruneTenure`: 1 to 36500.
    OlderThanDays,
    /// `@RecoveryId` of `fence_admin.Recover`: a non-nil id, reused only to
    /// repeat the same recovery.
    RecoveryId,
    /// `@Floor` of `fence_admin.Recover`: 0 to 2^62 - 1, or NULL.
    Floor,
    /// `@DatabaseIdentity` of `fence_admin.Recover`: a non-nil id, or NULL.
    DatabaseIdentity,
    /// `@Leases` of `fence_api.RenewMany` (contract v1.7): a JSON array of 1
    /// to 1000 leases, each with its key, owner, generation and length; of
    /// the lease-set procedures (contract v1.8, error 50135), each with its
    /// key and generation (and a publish's operation id and payload).
    Leases,
    /// `@ResourceKeys` of `fence_api.AcquireSet` (contract v1.8): a JSON
    /// array of 1 to 1000 keys, each once.
    ResourceKeys,
    /// `@Slots` of `fence_api.AcquireSlot` (contract v1.8): 1 to 1000.
    Slots,
}

impl Parameter {
    /// The parameter's name in T-SQL, e.g. `@ResourceKey`.
    pub fn name(self) -> &'static str {
        match self {
            Parameter::ResourceKey => "@ResourceKey",
            Parameter::Owner => "@Owner",
            Parameter::LeaseSeconds => "@LeaseSeconds",
            Parameter::Generation => "@Generation",
            Parameter::OperationId => "@OperationId",
            Parameter::Payload => "@Payload",
            Parameter::Release => "@Release",
            Parameter::SourceVersion => "@SourceVersion",
            Parameter::Prefix => "@Prefix",
            Parameter::HeldOnly => "@HeldOnly",
            Parameter::MaxRows => "@MaxRows",
            Parameter::After => "@After",
            Parameter::OlderThanDays => "@OlderThanDays",
            Parameter::RecoveryId => "@RecoveryId",
            Parameter::Floor => "@Floor",
            Parameter::DatabaseIdentity => "@DatabaseIdentity",
            Parameter::Leases => "@Leases",
            Parameter::ResourceKeys => "@ResourceKeys",
            Parameter::Slots => "@Slots",
        }
    }

    /// The parameter a documented contract error number is about: 50101–50109
    /// and 50133 (the services' procedures) and 50120–50126 and 50130 (the
    /// operators').
    pub fn for_error_number(number: u32) -> Option<Parameter> {
        Some(match number {
            50101 => Parameter::ResourceKey,
            50102 => Parameter::Owner,
            50103 => Parameter::LeaseSeconds,
            50104 => Parameter::Generation,
            50105 | 50107 => Parameter::OperationId,
            50106 => Parameter::Payload,
            50108 => Parameter::Release,
            50109 => Parameter::SourceVersion,
            50120 => Parameter::Prefix,
            50121 => Parameter::HeldOnly,
            50122 => Parameter::MaxRows,
            50123 => Parameter::OlderThanDays,
            50124 => Parameter::RecoveryId,
            50125 => Parameter::Floor,
            50126 => Parameter::DatabaseIdentity,
            50130 => Parameter::OperationId,
            50133 | 50135 => Parameter::Leases,
            50134 => Parameter::ResourceKeys,
            50136 => Parameter::Slots,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Parameter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_error_number_names_its_parameter() {
        let names: Vec<_> = (50101..=50109)
            .map(|n| Parameter::for_error_number(n).map(Parameter::name))
            .collect();
        assert_eq!(
            names,
            [
                Some("@ResourceKey"),
                Some("@Owner"),
                Some("@LeaseSeconds"),
                Some("@Generation"),
                Some("@OperationId"),
                Some("@Payload"),
                Some("@OperationId"),
                Some("@Release"),
                Some("@SourceVersion"),
            ]
        );
        assert_eq!(Parameter::for_error_number(50110), None);
        assert_eq!(Parameter::for_error_number(50133), Some(Parameter::Leases));
        assert_eq!(Parameter::for_error_number(50134), Some(Parameter::ResourceKeys));
        assert_eq!(Parameter::for_error_number(50135), Some(Parameter::Leases));
        assert_eq!(Parameter::for_error_number(50136), Some(Parameter::Slots));
    }

    #[test]
    fn every_operator_error_number_about_input_names_its_parameter() {
        let names: Vec<_> = (50120..=50130)
            .map(|n| Parameter::for_error_number(n).map(Parameter::name))
            .collect();
        assert_eq!(
            names,
            [
                Some("@Prefix"),
                Some("@HeldOnly"),
                Some("@MaxRows"),
                Some("@OlderThanDays"),
                Some("@RecoveryId"),
                Some("@Floor"),
                Some("@DatabaseIdentity"),
                // A lock not taken, a prune inside a transaction, a fence row
                // held too long: about no parameter.
                None,
                None,
                None,
                // An operation id used by another operator command or key.
                Some("@OperationId"),
            ]
        );
    }
}
