//! The rules, each with a stable id that pipelines and suppressions can name.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One rule of `fencepost check`. Ids are stable: a rule that changes meaning
/// gets a new id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// FP001: a service principal in a fixed role that can write or grant.
    PrivilegedRole,
    /// FP002: a service principal's login is `sysadmin` or holds `CONTROL SERVER`.
    ServerControl,
    /// FP003: write or control permission on the fence tables, schema or database.
    WriteAccess,
    /// FP004: SELECT on the fence tables.
    ReadAccess,
    /// FP005: permission to create or change code that could reach the fence.
    CodeChange,
    /// FP006: permission to act as, or reshape, other principals.
    PrincipalControl,
    /// FP007: EXECUTE beyond the procedures of a principal's role.
    ExecuteBeyondRole,
    /// FP008: a module other than the shipped procedures that references a
    /// fence table or calls a shipped procedure (a DDL trigger included).
    ForeignModule,
    /// FP009: a shipped procedure not owned by its tables' owner.
    OwnershipChain,
    /// FP010: a shipped procedure that uses dynamic SQL or `EXECUTE AS`.
    DynamicSql,
    /// FP011: a shipped procedure missing or different from the deployed one.
    Drift,
    /// FP012: cross-database ownership chaining is on.
    CrossDatabaseChaining,
    /// FP013: the database is TRUSTWORTHY.
    Trustworthy,
    /// FP014: `guest` can connect.
    GuestConnect,
    /// FP015: a service principal enters the database as `dbo`.
    ServiceIsDbo,
    /// FP016: a service login holds a server role or permission that reaches
    /// the fence (securityadmin, ALTER ANY DATABASE, IMPERSONATE ANY LOGIN,
    /// ...).
    ServerPrivilege,
    /// FP017: code other than the shipped procedures that a service can run
    /// and that runs as someone else (EXECUTE AS, a signature).
    RunsAsSomeoneElse,
    /// FP018: a service is `db_owner` of another TRUSTWORTHY database owned
    /// by a privileged login.
    TrustworthyElsewhere,
    /// FP019: the database was restored or failed over since its identity
    /// was recorded: generations may have gone back.
    DatabaseIdentity,
    /// FP020: control of a schema that holds code or tables owned by the
    /// fence tables' owner: altering them keeps their owner, so the chain
    /// reaches the fence.
    SchemaCode,
    /// FP021: a principal outside the services that can make itself one
    /// (impersonate a service, reshape a fence role, join any role).
    BecomeService,
    /// FP022: code that reaches the fence indirectly: a DDL or server trigger
    /// calling code that builds SQL, a numbered or case-variant procedure
    /// beside a shipped one, names resolved through a default schema.
    IndirectCode,
    /// FP023: copies and side channels of the fence rows: backups, history
    /// and change tables, replication, security policies, REFERENCES.
    SideChannel,
    /// FP024: a SQL Server Agent job step that runs T-SQL in this database,
    /// as its owner, and that can reach the fence or that a non-admin edits.
    AgentJob,
    /// FP025: a linked server that connects back to this server, or as
    /// another login.
    LinkedServer,
    /// FP026: a Service Broker activation procedure that reaches the fence
    /// and runs as someone else on messages a non-admin sends.
    QueueActivation,
    /// FP027: a principal the policy does not trust that can write a fence
    /// table, run a fence_admin procedure or change the shipped procedures
    /// other than through them, by any path of membership, ownership,
    /// impersonation, password resets, grants (weighed by the permission
    /// hierarchy) and code that runs as the fence tables' owner.
    ReachesFence,
    /// FP028: a way out of T-SQL that the catalog shows but whose reach it
    /// cannot follow: Agent steps of other subsystems, xp_cmdshell for
    /// others than sysadmin, start-up procedures, EXTERNAL_ACCESS or UNSAFE
    /// assemblies, external data sources. Each is "cannot verify", named.
    OutsideTsql,
    /// FP101: a GRANT in the shipped permission scripts other than EXECUTE on
    /// a shipped procedure to a fence role.
    ShippedGrant,
    /// FP102: a shipped `fence_api` procedure not granted to `fence_service`.
    ServiceGrantMissing,
}

impl Rule {
    /// Every rule `evaluate` applies to a live catalog, in id order.
    pub const LIVE: [Rule; 28] = [
        Rule::PrivilegedRole,
        Rule::ServerControl,
        Rule::WriteAccess,
        Rule::ReadAccess,
        Rule::CodeChange,
        Rule::PrincipalControl,
        Rule::ExecuteBeyondRole,
        Rule::ForeignModule,
        Rule::OwnershipChain,
        Rule::DynamicSql,
        Rule::Drift,
        Rule::CrossDatabaseChaining,
        Rule::Trustworthy,
        Rule::GuestConnect,
        Rule::ServiceIsDbo,
        Rule::ServerPrivilege,
        Rule::RunsAsSomeoneElse,
        Rule::TrustworthyElsewhere,
        Rule::DatabaseIdentity,
        Rule::SchemaCode,
        Rule::BecomeService,
        Rule::IndirectCode,
        Rule::SideChannel,
        Rule::AgentJob,
        Rule::LinkedServer,
        Rule::QueueActivation,
        Rule::ReachesFence,
        Rule::OutsideTsql,
    ];

    /// Every rule `lint_offline` applies to the shipped sources, in id order.
    pub const OFFLINE: [Rule; 4] = [
        Rule::ExecuteBeyondRole,
        Rule::DynamicSql,
        Rule::ShippedGrant,
        Rule::ServiceGrantMissing,
    ];

    /// The stable id, `FP` and three digits.
    pub fn id(self) -> &'static str {
        match self {
            Rule::PrivilegedRole => "FP001",
            Rule::ServerControl => "FP002",
            Rule::WriteAccess => "FP003",
            Rule::ReadAccess => "FP004",
            Rule::CodeChange => "FP005",
            Rule::PrincipalControl => "FP006",
            Rule::ExecuteBeyondRole => "FP007",
            Rule::ForeignModule => "FP008",
            Rule::OwnershipChain => "FP009",
            Rule::DynamicSql => "FP010",
            Rule::Drift => "FP011",
            Rule::CrossDatabaseChaining => "FP012",
            Rule::Trustworthy => "FP013",
            Rule::GuestConnect => "FP014",
            Rule::ServiceIsDbo => "FP015",
            Rule::ServerPrivilege => "FP016",
            Rule::RunsAsSomeoneElse => "FP017",
            Rule::TrustworthyElsewhere => "FP018",
            Rule::DatabaseIdentity => "FP019",
            Rule::SchemaCode => "FP020",
            Rule::BecomeService => "FP021",
            Rule::IndirectCode => "FP022",
            Rule::SideChannel => "FP023",
            Rule::AgentJob => "FP024",
            Rule::LinkedServer => "FP025",
            Rule::QueueActivation => "FP026",
            Rule::ReachesFence => "FP027",
            Rule::OutsideTsql => "FP028",
            Rule::ShippedGrant => "FP101",
            Rule::ServiceGrantMissing => "FP102",
        }
    }

    /// A one-line title.
    pub fn title(self) -> &'static str {
        match self {
            Rule::PrivilegedRole => "service principal in a privileged database role",
            Rule::ServerControl => "service login is sysadmin or holds CONTROL SERVER",
            Rule::WriteAccess => "write or control permission on the fence",
            Rule::ReadAccess => "SELECT on the fence tables",
            Rule::CodeChange => "permission to create or change code",
            Rule::PrincipalControl => "permission to impersonate or manage principals",
            Rule::ExecuteBeyondRole => "EXECUTE beyond the role's procedures",
            Rule::ForeignModule => "module other than the shipped procedures references the fence",
            Rule::OwnershipChain => "shipped procedure not owned by the tables' owner",
            Rule::DynamicSql => "shipped procedure uses dynamic SQL or EXECUTE AS",
            Rule::Drift => "shipped procedure differs from the deployed definition",
            Rule::CrossDatabaseChaining => "cross-database ownership chaining is on",
            Rule::Trustworthy => "database is TRUSTWORTHY",
            Rule::GuestConnect => "guest can connect",
            Rule::ServiceIsDbo => "service principal enters the database as dbo",
            Rule::ServerPrivilege => "service login holds a server privilege that reaches the fence",
            Rule::RunsAsSomeoneElse => "code a service can run runs as someone else",
            Rule::TrustworthyElsewhere => "service is db_owner of another TRUSTWORTHY database",
            Rule::DatabaseIdentity => "database restored or failed over since its identity was recorded",
            Rule::SchemaCode => "control of a schema that holds code owned by the fence tables' owner",
            Rule::BecomeService => "principal outside the services can make itself one",
            Rule::IndirectCode => "code reaches the fence indirectly",
            Rule::SideChannel => "copy or side channel of the fence rows",
            Rule::AgentJob => "Agent job step runs T-SQL in this database as its owner",
            Rule::LinkedServer => "linked server connects back to this server or as another login",
            Rule::QueueActivation => "queue activation procedure reaches the fence as someone else",
            Rule::ReachesFence => "untrusted principal reaches the fence other than through the shipped procedures",
            Rule::OutsideTsql => "a way out of T-SQL whose reach the catalog cannot follow",
            Rule::ShippedGrant => "shipped GRANT other than EXECUTE on a shipped procedure to a fence role",
            Rule::ServiceGrantMissing => "fence_api procedure not granted to fence_service",
        }
    }
}

/// A rule serializes as its id, the name pipelines see.
impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        Rule::from_id(&id).ok_or_else(|| serde::de::Error::custom(format!("unknown rule id '{id}'")))
    }
}

impl Rule {
    /// The rule with this id (`FP001`).
    pub fn from_id(id: &str) -> Option<Rule> {
        Rule::LIVE
            .into_iter()
            .chain(Rule::OFFLINE)
            .find(|r| r.id().eq_ignore_ascii_case(id))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.id(), self.title())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut all: Vec<Rule> = Rule::LIVE.into_iter().chain(Rule::OFFLINE).collect();
        all.sort();
        all.dedup();
        let mut ids: Vec<&str> = all.iter().map(|r| r.id()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len());
        assert!(ids.iter().all(|id| id.len() == 5 && id.starts_with("FP")));
    }
}
