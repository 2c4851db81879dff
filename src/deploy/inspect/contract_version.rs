//! The procedure contract version a database answers, for `fencepost status`.

use crate::client::ContractVersion;
use crate::connection::Connection;

use crate::deploy::error::DeployError;

/// The version `fence_api.ContractVersion` answers, or `None` when the
/// procedure is not deployed (a database older than it, or none deployed).
pub async fn read_contract_version(conn: &mut Connection) -> Result<Option<ContractVersion>, DeployError> {
    const CONTEXT: &str = "reading the deployed contract version";
    let rows = conn
        .simple_query(crate::client::contract_version_query())
        .await
        .map_err(DeployError::server(CONTEXT))?
        .into_first_result()
        .await
        .map_err(DeployError::server(CONTEXT))?;
    Ok(crate::client::read_contract_version(&rows))
}
