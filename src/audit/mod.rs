//! `fencepost check`: proves that nothing but the shipped procedures can
//! write the fence.
//!
//! The rules are one pure function, [`evaluate`], from a [`Catalog`] snapshot
//! and a [`Policy`] to a [`Report`]; [`read_catalog`] takes the snapshot from
//! a live database in two round trips, and [`lint_offline`] applies the rules
//! that need no server to the shipped T-SQL. Where a catalog cannot show what
//! a rule needs, the report says "cannot verify" with the reason, and
//! [`Report::exit_code`] is 3, never a clean 0, unless the operator accepts
//! that rule by name ([`Report::accept_unverifiable`]): the report then
//! records it as accepted, with the reason and who accepted it.
//!
//! ```no_run
//! # async fn run(mut connection: fencepost::Connection) -> Result<(), fencepost::audit::AuditError> {
//! use fencepost::audit::{self, Format, Policy};
//!
//! let catalog = audit::read_catalog(&mut connection).await?;
//! let report = audit::evaluate(&catalog, &Policy::default());
//! print!("{}", audit::render(&report, Format::Text));
//! std::process::exit(report.exit_code());
//! # }
//! ```

mod catalog;
mod error;
mod finding;
pub mod hierarchy;
mod module_text;
mod offline;
mod policy;
mod reach;
mod read;
mod render;
mod report;
mod rule;
mod rules;

pub use catalog::{
    AgentProxy, Assembly, AvailabilityGroupPermission, Catalog, DatabaseSettings, Dependency, DeployedProcedure,
    Engine, FenceTableFeature, ForeignKey, IdentityReading, JobEditor, JobStep, LinkedLogin, LinkedServer,
    LinkedServers, LoginKind, Membership, Object, ObjectKind, OtherDatabase, OtherDatabaseUser, OutsideItem,
    OutsideKind, OutsideTsql, Permission, PermissionState, Principal, PrincipalKind, ProxyUser, ProxyUserKind,
    ReferentialAction, Schema, Securable, ServerFacts, ServerPermission, ServerRoleOwner, ServerSettings,
    ServerTrigger, ServiceQueue, SigningKey, TableExpression, TableFeature, Unread, UserAuthentication, Visibility,
};
pub use error::AuditError;
pub use finding::{AcceptedUnverifiable, CannotVerify, Finding, Step};
#[allow(deprecated)]
pub use offline::Sources;
pub use offline::{ShippedScripts, Source, lint_offline, shipped_grants};
pub use policy::{Policy, ShippedProcedure};
pub use read::{read_catalog, read_catalog_counted};
pub use render::{Format, render};
pub use report::{EXIT_CANNOT_VERIFY, EXIT_CLEAN, EXIT_FINDINGS, Report, RuleOutcome, TrustedReach};
pub use rule::Rule;
pub use rules::evaluate;
