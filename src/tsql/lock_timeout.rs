//! How each engine says that a statement waited longer than `SET
//! LOCK_TIMEOUT` allows: SQL Server with error 1222, Babelfish with the
//! generic number it gives every PostgreSQL error and PostgreSQL's message.
//! The deploy runner and the client both need to tell it apart.

/// SQL Server's "Lock request time out period exceeded."
const SQL_SERVER: u32 = 1222;

/// Babelfish's number and message for PostgreSQL's lock_timeout.
const BABELFISH: (u32, &str) = (33557097, "canceling statement due to lock timeout");

/// Whether the server error `number` with `message` is a lock time-out.
pub(crate) fn is_lock_timeout(number: u32, message: &str) -> bool {
    number == SQL_SERVER || (number, message) == BABELFISH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_engines_lock_timeout_is_one_and_babelfishs_number_alone_is_not() {
        assert!(is_lock_timeout(1222, "Lock request time out period exceeded."));
        assert!(is_lock_timeout(33557097, "canceling statement due to lock timeout"));
        assert!(!is_lock_timeout(33557097, "relation \"x\" does not exist"));
    }
}
