//! The start-up check that the database holds the contract: for a service
//! ([`Client::verify_contract`]) and for an operator
//! ([`Admin::verify_contract`](super::Admin::verify_contract)). Both read the
//! same one-batch reply; they differ in what they require of it.

use tiberius::Row;

use super::call::{checkout, classify_statement};
use super::contract::{self, CatalogRow, Definition, Half};
use super::error::Error;
use super::{Client, privilege};

/// What the context of a failed catalog read names as its procedure.
const PROCEDURE: &str = "the catalog query of verify_contract";

/// The catalog as this login sees it: the fence procedures and their
/// parameters and texts, the session's rights, and the deployed version
/// (`None` when the login cannot see the procedure that answers it).
struct Reading {
    catalog: Vec<CatalogRow>,
    definitions: Vec<Definition>,
    rights: Vec<Row>,
    version: Option<Vec<Row>>,
}

impl Client {
    /// Checks that the database holds every `fence_api` procedure of contract
    /// [`CONTRACT_VERSION`](super::CONTRACT_VERSION) with the parameters this
    /// client passes, and that this client's own login cannot write the fence
    /// table past them. Call it at start-up: the error names each procedure
    /// or parameter that is missing or different, or
    /// ([`Error::PrivilegedLogin`]) why the login is too strong: it may
    /// update, insert or delete rows of the fence tables, alter a fence
    /// schema (and so redefine a procedure), controls the database, or
    /// enters it as `dbo`. This reads the session's own effective rights; it
    /// is a quick guard, not the proof that `fencepost check` gives. A caller
    /// that means to run with such a login says so with
    /// [`ClientConfig::allow_privileged_login`](super::ClientConfig::allow_privileged_login).
    /// A `fence_admin` procedure the login can see is compared too.
    pub async fn verify_contract(&self) -> Result<(), Error> {
        // A fake speaks the contract this client does, as the least
        // privileged login.
        #[cfg(feature = "fake")]
        if self.as_fake().is_some() {
            return Ok(());
        }
        let reading = self.read_contract().await?;
        reading.compare(Half::Service)?;
        let row = reading.rights.first();
        let user = row.and_then(|r| r.try_get::<&str, _>("UserName").ok().flatten());
        let reasons = privilege::excess(user, |column| {
            row.and_then(|r| r.try_get::<i32, _>(column).ok().flatten())
        });
        if reasons.is_empty() || self.config.allow_privileged_login {
            Ok(())
        } else {
            Err(Error::PrivilegedLogin {
                user: user.unwrap_or("unknown").to_string(),
                reasons,
            })
        }
    }

    /// The operators' check: each `fence_admin` procedure this login can see
    /// has the parameters the client passes, at least one is visible, and the
    /// deployed version (when the login may read it) is one this client
    /// speaks. No `fence_api` procedure is required and the login's rights
    /// are not judged: an operator's login holds neither the service role
    /// nor, often, less than the deploy login's rights.
    pub(crate) async fn verify_operator_contract(&self) -> Result<(), Error> {
        #[cfg(feature = "fake")]
        if self.as_fake().is_some() {
            return Ok(());
        }
        self.read_contract().await?.compare(Half::Operator)
    }

    /// One round trip: the contract's catalog rows, the session's rights, the
    /// procedures' texts, then the deployed version (absent when the
    /// procedure that answers it is missing or not visible).
    async fn read_contract(&self) -> Result<Reading, Error> {
        let network = |e| classify_statement(PROCEDURE, e);
        let mut session = checkout(&self.pool, &self.last_connect_error, &self.config).await?;
        session.in_call = true;
        let batch = format!(
            "{};\n{};\n{};\n{};",
            contract::CATALOG_QUERY,
            privilege::privilege_query(),
            contract::DEFINITION_QUERY,
            contract::VERSION_QUERY
        );
        let exchange = async { session.connection.simple_query(batch).await?.into_results().await };
        let timeout = self.config.call_timeout;
        // Bounded like every procedure call; on a timeout `in_call` stays set
        // and the pool drops the connection with its unread reply.
        let mut sets = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => return Err(Error::timed_out(PROCEDURE, timeout)),
            Ok(result) => result.map_err(network)?,
        };
        session.in_call = false;
        if !(3..=4).contains(&sets.len()) {
            return Err(Error::UnexpectedReply {
                procedure: PROCEDURE,
                detail: format!("{} result sets instead of 3 or 4", sets.len()),
            });
        }
        let version = if sets.len() == 4 { sets.pop() } else { None };
        let texts = sets.pop().unwrap_or_default();
        let rights = sets.pop().unwrap_or_default();
        let rows = sets.pop().unwrap_or_default();
        let text = |row: &Row, column: &str| row.try_get::<&str, _>(column).ok().flatten().map(str::to_string);
        let catalog = rows
            .iter()
            .map(|row| CatalogRow {
                schema: text(row, "SchemaName").unwrap_or_default(),
                procedure: text(row, "ProcedureName").unwrap_or_default(),
                parameter: text(row, "ParameterName"),
                type_name: text(row, "TypeName"),
                max_length: row.try_get::<i32, _>("MaxLength").ok().flatten(),
            })
            .collect();
        let definitions = texts
            .iter()
            .map(|row| Definition {
                schema: text(row, "SchemaName").unwrap_or_default(),
                procedure: text(row, "ProcedureName").unwrap_or_default(),
                text: text(row, "Definition"),
            })
            .collect();
        Ok(Reading {
            catalog,
            definitions,
            rights,
            version,
        })
    }
}

impl Reading {
    /// Every problem for a caller of `half`'s procedures, as one error; the
    /// compatible differences are logged.
    fn compare(&self, half: Half) -> Result<(), Error> {
        let found = contract::differences(&self.catalog, &self.definitions, half);
        let mut problems = found.problems;
        if let Some(rows) = &self.version {
            match contract::read_version(rows) {
                Some(deployed) => problems.extend(contract::version_problem(deployed)),
                None => problems.push("fence_api.ContractVersion did not answer one Version row".to_string()),
            }
        }
        if !problems.is_empty() {
            return Err(Error::ContractMismatch {
                version: contract::CONTRACT_VERSION,
                problems,
            });
        }
        for warning in &found.warnings {
            tracing::warn!("{warning}");
        }
        Ok(())
    }
}
