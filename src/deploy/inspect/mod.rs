//! Read-only probes for `fencepost status`: the plan without the lock, the
//! deploy history, a drifted procedure's definition, the contract version,
//! SECURITY DEFINER on Babelfish and the database identity, and the
//! [`StatusReport`] that gathers them. None of them changes anything.

mod contract_version;
mod definition;
mod history;
mod identity;
mod security_definer;
mod status;
mod status_report;

pub use contract_version::read_contract_version;
pub use definition::{definition_diff, read_definition};
pub use history::{DeployHistory, Deployment, read_history};
pub use identity::{read_current_identity, read_recorded_identity};
pub use security_definer::{SecurityDefiner, read as read_security_definer};
pub use status::status;
pub use status_report::{ProcedureDiff, StatusOptions, StatusReport, status_report};
