//! The procedure contract this client speaks: each procedure with its
//! parameters and the one statement used to call it, the contract's
//! version, and the start-up check that the database holds them. The
//! services' half is `fence_api`; the operators' half, `fence_admin`, is
//! what [`Admin`](super::Admin) calls.

mod catalog;
mod procedure;
mod version;

pub(crate) use catalog::{CATALOG_QUERY, CatalogRow, DEFINITION_QUERY, Definition, differences};
pub(crate) use procedure::Half;
pub use procedure::Procedure;
pub use version::{CONTRACT_VERSION, ContractVersion};
pub(crate) use version::{VERSION_QUERY, read_version, version_problem};
