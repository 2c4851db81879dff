//! The procedure contract version a database answers, for `fencepost status`.

use crate::client::ContractVersion;
use crate::connection::Connection;

use crate::deploy::error::DeployError;
use crate::deploy::run::Session;

/// The version `fence_api.ContractVersion` answers, or `None` when the
/// procedure is not deployed (a database older than it, or none deployed).
pub async fn read_contract_version(conn: &mut Connection) -> Result<Option<ContractVersion>, DeployError> {
    const CONTEXT: &str = "reading the deployed contract version";
    let rows = Session::new(conn)
        .first_result(crate::client::contract_version_query(), CONTEXT)
        .await?;
    Ok(crate::client::read_contract_version(&rows))
}
