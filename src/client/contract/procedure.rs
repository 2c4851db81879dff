//! Each procedure of the contract with its parameters, and the one statement
//! that calls it: the services' `fence_api` and the operators' `fence_admin`.

use crate::client::parameter::Parameter;

/// A procedure of the contract: what the fake's faults are scripted for
/// (feature `fake`), and what its [`name`](Procedure::name) says in errors.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Procedure {
    /// `fence_api.Provision`.
    Provision,
    /// `fence_api.Acquire`.
    Acquire,
    /// `fence_api.Renew`.
    Renew,
    /// `fence_api.RenewMany`.
    RenewMany,
    /// `fence_api.Publish`.
    Publish,
    /// `fence_api.Release`.
    Release,
    /// `fence_api.GetOutcome`.
    GetOutcome,
    /// `fence_api.ReadPublication`.
    ReadPublication,
    /// `fence_api.Inspect`.
    Inspect,
    /// `fence_api.AssertHolder`.
    AssertHolder,
    /// `fence_api.ContractVersion`.
    ContractVersion,
    /// `fence_admin.ListLeases`.
    ListLeases,
    /// `fence_admin.ForceRelease`.
    ForceRelease,
    /// `fence_admin.LeaseHistory`.
    LeaseHistory,
    /// `fence_admin.PruneTenure`.
    PruneTenure,
    /// `fence_admin.Recover`.
    Recover,
    /// `fence_admin.ResetSourceVersion`.
    ResetSourceVersion,
    /// `fence_admin.Retire`.
    Retire,
    /// `fence_admin.PruneOutcomes`.
    PruneOutcomes,
    /// `fence_api.AcquireSet` (contract v1.8).
    AcquireSet,
    /// `fence_api.RenewSet` (contract v1.8).
    RenewSet,
    /// `fence_api.ReleaseSet` (contract v1.8).
    ReleaseSet,
    /// `fence_api.PublishSet` (contract v1.8).
    PublishSet,
    /// `fence_api.AssertHolderSet` (contract v1.8).
    AssertHolderSet,
    /// `fence_api.AcquireSlot` (contract v1.8).
    AcquireSlot,
}

/// The half of the contract a procedure belongs to, by its schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Half {
    /// `fence_api`: what services call. Every procedure is granted to a
    /// service or reader role, and a database without one lacks the contract.
    Service,
    /// `fence_admin`: what operators call. Each is granted to some operator
    /// roles only, and a login sees only those it may run.
    Operator,
}

/// A parameter's declared type as the catalog names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SqlType {
    /// `nvarchar` wide enough to hold a 257-character key, so an over-long key
    /// reaches the procedure's check instead of being truncated to fit.
    WideKey,
    /// `nvarchar(max)`.
    NVarCharMax,
    UniqueIdentifier,
    Int,
    BigInt,
    Bit,
}

use Parameter as P;
use SqlType as T;

impl Procedure {
    pub(crate) const ALL: [Procedure; 25] = [
        Procedure::Provision,
        Procedure::Acquire,
        Procedure::Renew,
        Procedure::RenewMany,
        Procedure::Publish,
        Procedure::Release,
        Procedure::GetOutcome,
        Procedure::ReadPublication,
        Procedure::Inspect,
        Procedure::AssertHolder,
        Procedure::ContractVersion,
        Procedure::ListLeases,
        Procedure::ForceRelease,
        Procedure::LeaseHistory,
        Procedure::PruneTenure,
        Procedure::Recover,
        Procedure::ResetSourceVersion,
        Procedure::Retire,
        Procedure::PruneOutcomes,
        Procedure::AcquireSet,
        Procedure::RenewSet,
        Procedure::ReleaseSet,
        Procedure::PublishSet,
        Procedure::AssertHolderSet,
        Procedure::AcquireSlot,
    ];

    /// The schema-qualified name, as used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Procedure::Provision => "fence_api.Provision",
            Procedure::Acquire => "fence_api.Acquire",
            Procedure::Renew => "fence_api.Renew",
            Procedure::RenewMany => "fence_api.RenewMany",
            Procedure::Publish => "fence_api.Publish",
            Procedure::Release => "fence_api.Release",
            Procedure::GetOutcome => "fence_api.GetOutcome",
            Procedure::ReadPublication => "fence_api.ReadPublication",
            Procedure::Inspect => "fence_api.Inspect",
            Procedure::AssertHolder => "fence_api.AssertHolder",
            Procedure::ContractVersion => "fence_api.ContractVersion",
            Procedure::ListLeases => "fence_admin.ListLeases",
            Procedure::ForceRelease => "fence_admin.ForceRelease",
            Procedure::LeaseHistory => "fence_admin.LeaseHistory",
            Procedure::PruneTenure => "fence_admin.PruneTenure",
            Procedure::Recover => "fence_admin.Recover",
            Procedure::ResetSourceVersion => "fence_admin.ResetSourceVersion",
            Procedure::Retire => "fence_admin.Retire",
            Procedure::PruneOutcomes => "fence_admin.PruneOutcomes",
            Procedure::AcquireSet => "fence_api.AcquireSet",
            Procedure::RenewSet => "fence_api.RenewSet",
            Procedure::ReleaseSet => "fence_api.ReleaseSet",
            Procedure::PublishSet => "fence_api.PublishSet",
            Procedure::AssertHolderSet => "fence_api.AssertHolderSet",
            Procedure::AcquireSlot => "fence_api.AcquireSlot",
        }
    }

    /// The schema, as the catalog names it.
    pub(crate) fn schema(self) -> &'static str {
        self.name().split_once('.').map_or("", |(schema, _)| schema)
    }

    /// The name within the schema, as the catalog names it.
    pub(crate) fn short_name(self) -> &'static str {
        self.name().split_once('.').map_or(self.name(), |(_, name)| name)
    }

    pub(crate) fn half(self) -> Half {
        match self.schema() {
            "fence_admin" => Half::Operator,
            _ => Half::Service,
        }
    }

    /// Whether the procedure answers any number of rows (one per lease or
    /// tenure) rather than exactly one.
    pub(crate) fn answers_rows(self) -> bool {
        matches!(
            self,
            Procedure::ListLeases
                | Procedure::LeaseHistory
                | Procedure::RenewMany
                | Procedure::AcquireSet
                | Procedure::RenewSet
                | Procedure::ReleaseSet
                | Procedure::PublishSet
                | Procedure::AssertHolderSet
        )
    }

    pub(crate) fn parameters(self) -> &'static [(Parameter, SqlType)] {
        match self {
            Procedure::Provision | Procedure::ReadPublication | Procedure::Inspect => &[(P::ResourceKey, T::WideKey)],
            Procedure::ForceRelease | Procedure::Retire => {
                &[(P::ResourceKey, T::WideKey), (P::OperationId, T::UniqueIdentifier)]
            }
            Procedure::Acquire => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::LeaseSeconds, T::Int),
            ],
            Procedure::Renew => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
                (P::LeaseSeconds, T::Int),
            ],
            Procedure::RenewMany => &[(P::Leases, T::NVarCharMax)],
            Procedure::AcquireSet => &[
                (P::ResourceKeys, T::NVarCharMax),
                (P::Owner, T::UniqueIdentifier),
                (P::LeaseSeconds, T::Int),
            ],
            Procedure::RenewSet => &[
                (P::Leases, T::NVarCharMax),
                (P::Owner, T::UniqueIdentifier),
                (P::LeaseSeconds, T::Int),
            ],
            Procedure::ReleaseSet | Procedure::AssertHolderSet => {
                &[(P::Leases, T::NVarCharMax), (P::Owner, T::UniqueIdentifier)]
            }
            Procedure::AcquireSlot => &[
                (P::ResourceKey, T::WideKey),
                (P::Slots, T::Int),
                (P::Owner, T::UniqueIdentifier),
                (P::LeaseSeconds, T::Int),
            ],
            Procedure::PublishSet => &[
                (P::Leases, T::NVarCharMax),
                (P::Owner, T::UniqueIdentifier),
                (P::Release, T::Bit),
            ],
            Procedure::Publish => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
                (P::OperationId, T::UniqueIdentifier),
                (P::Payload, T::NVarCharMax),
                (P::Release, T::Bit),
                (P::SourceVersion, T::BigInt),
            ],
            Procedure::Release => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
            ],
            Procedure::AssertHolder => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
                (P::SourceVersion, T::BigInt),
            ],
            Procedure::GetOutcome => &[(P::OperationId, T::UniqueIdentifier)],
            Procedure::ContractVersion => &[],
            Procedure::ListLeases => &[
                (P::Prefix, T::WideKey),
                (P::HeldOnly, T::Bit),
                (P::MaxRows, T::Int),
                (P::After, T::WideKey),
            ],
            Procedure::LeaseHistory => &[(P::ResourceKey, T::WideKey), (P::MaxRows, T::Int)],
            Procedure::PruneTenure | Procedure::PruneOutcomes => &[(P::OlderThanDays, T::Int)],
            Procedure::Recover => &[
                (P::RecoveryId, T::UniqueIdentifier),
                (P::Floor, T::BigInt),
                (P::DatabaseIdentity, T::UniqueIdentifier),
            ],
            Procedure::ResetSourceVersion => &[
                (P::ResourceKey, T::WideKey),
                (P::SourceVersion, T::BigInt),
                (P::OperationId, T::UniqueIdentifier),
            ],
        }
    }

    /// The one statement that calls the procedure, its arguments bound in
    /// contract order as `@P1, @P2, ...`. Arguments are passed by name so a
    /// contract version that appends optional parameters still works.
    pub(crate) fn statement(self) -> String {
        self.statement_for(self.parameters().len())
    }

    /// The statement binding only the first `count` parameters: the ones
    /// after take their declared defaults. An optional parameter left out
    /// rather than bound to a NULL of no declared type, which some engines'
    /// RPC parsers refuse.
    pub(crate) fn statement_for(self, count: usize) -> String {
        let arguments: Vec<String> = self
            .parameters()
            .iter()
            .take(count)
            .enumerate()
            .map(|(i, (parameter, _))| format!("{} = @P{}", parameter.name(), i + 1))
            .collect();
        format!("EXEC {} {}", self.name(), arguments.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_statement_binds_the_parameters_by_name_in_order() {
        assert_eq!(
            Procedure::Publish.statement(),
            "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @OperationId = @P4, @Payload = @P5, @Release = @P6, @SourceVersion = @P7"
        );
    }

    #[test]
    fn an_optional_trailing_parameter_can_be_left_to_its_default() {
        assert_eq!(
            Procedure::ListLeases.statement_for(3),
            "EXEC fence_admin.ListLeases @Prefix = @P1, @HeldOnly = @P2, @MaxRows = @P3"
        );
        assert_eq!(
            Procedure::ListLeases.statement(),
            "EXEC fence_admin.ListLeases @Prefix = @P1, @HeldOnly = @P2, @MaxRows = @P3, @After = @P4"
        );
    }

    #[test]
    fn the_operator_commands_bind_their_operation_id_last() {
        assert_eq!(
            Procedure::ForceRelease.statement(),
            "EXEC fence_admin.ForceRelease @ResourceKey = @P1, @OperationId = @P2"
        );
        assert_eq!(
            Procedure::ResetSourceVersion.statement(),
            "EXEC fence_admin.ResetSourceVersion @ResourceKey = @P1, @SourceVersion = @P2, @OperationId = @P3"
        );
    }

    #[test]
    fn the_halves_follow_the_schemas() {
        for procedure in Procedure::ALL {
            let expected = if procedure.name().starts_with("fence_admin.") {
                Half::Operator
            } else {
                Half::Service
            };
            assert_eq!(procedure.half(), expected, "{procedure:?}");
            assert_eq!(
                format!("{}.{}", procedure.schema(), procedure.short_name()),
                procedure.name()
            );
        }
    }
}
