//! How each engine says that a procedure called does not exist: SQL Server
//! with error 2812, Babelfish with the generic number it gives every
//! PostgreSQL error and PostgreSQL's message, which names the procedure
//! (lower-cased, its schema prefixed by the database's name in a database
//! of many, as is in a single-database instance) and its arguments, or the
//! schema when that is missing too. The client needs it
//! to tell a database older than a procedure from a call that failed.

/// SQL Server's "Could not find stored procedure '%.*ls'."
const SQL_SERVER: u32 = 2812;

/// The number Babelfish gives every PostgreSQL error.
const BABELFISH: u32 = 33557097;

/// Whether the server error `number` with `message` says that the
/// procedure `name` (`schema.procedure`) does not exist.
pub(crate) fn is_missing_procedure(number: u32, message: &str, name: &str) -> bool {
    if number == SQL_SERVER {
        return true;
    }
    let Some((schema, procedure)) = name
        .to_lowercase()
        .split_once('.')
        .map(|(s, p)| (s.to_string(), p.to_string()))
    else {
        return false;
    };
    let message = message.to_lowercase();
    number == BABELFISH
        && message.ends_with("does not exist")
        && ((message.starts_with("procedure ") && message.contains(&format!("{schema}.{procedure}(")))
            || (message.starts_with("schema ") && message.contains(&format!("{schema}\""))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_s_missing_procedure_is_told_from_other_errors() {
        let name = "fence_api.RenewMany";
        assert!(is_missing_procedure(
            2812,
            "Could not find stored procedure 'fence_api.RenewMany'.",
            name
        ));
        assert!(is_missing_procedure(
            33557097,
            "procedure app_fence_api.renewmany(@leases => text) does not exist",
            name
        ));
        assert!(is_missing_procedure(
            33557097,
            "schema \"app_fence_api\" does not exist",
            name
        ));
        assert!(!is_missing_procedure(33557097, "relation \"x\" does not exist", name));
        assert!(!is_missing_procedure(
            33557097,
            "procedure app_fence_api.renew(@x => int) does not exist",
            name
        ));
        assert!(!is_missing_procedure(
            33557097,
            "canceling statement due to lock timeout",
            name
        ));
        assert!(!is_missing_procedure(1205, "deadlock victim", name));
    }
}
