//! Deploying one procedure, and dropping one fencepost deployed and no longer
//! ships: each in a transaction of its own, with its journal row.

use super::session::Session;
use crate::deploy::error::DeployError;
use crate::deploy::sql::{begin_procedure_deploy, commit_procedure, drop_retired_procedure};
use crate::source::ProcedureSource;

/// Creates (as a stub, when `OBJECT_ID` finds none) and alters one procedure,
/// and journals it, in one transaction: a failure leaves the previous
/// definition in place.
pub(crate) async fn deploy_procedure(
    session: &mut Session<'_>,
    procedure: &ProcedureSource,
) -> Result<(), DeployError> {
    let file = format!("procedures/{}", procedure.file());
    let steps = async {
        session.run_one(&file, &begin_procedure_deploy(procedure)).await?;
        session.run_one(&file, &procedure.alter_text()).await?;
        session.run_one(&file, &commit_procedure(procedure)).await
    };
    let result = steps.await;
    if result.is_err() {
        session.roll_back().await;
    }
    result
}

/// Drops `name` (`schema.name`, as the server reports it) and its journal row.
pub(crate) async fn drop_retired(session: &mut Session<'_>, name: &str) -> Result<(), DeployError> {
    session
        .run(&drop_retired_procedure(name))
        .await
        .map(drop)
        .map_err(DeployError::server(format!("dropping retired procedure {name}")))
}
