//! What follows an `sp_getapplock` that may be refused, on every engine.
//!
//! Babelfish 4.2 catches a refused application lock request (a time-out,
//! "unavailable", a deadlock) without clearing the session's error stack:
//! each refusal keeps one entry, and the fifth ends the whole server (`PANIC:
//! ERRORDATA_STACK_SIZE exceeded`, every session of every database with it).
//! An error thrown and caught empties the stack (docs/engines.md). On SQL
//! Server the statement does nothing.

/// The statement to run right after `EXEC $status = sp_getapplock ...`,
/// naming the variable that holds its status (a string literal, e.g.
/// `"@Status"`): on Babelfish, a refusal clears the session's error stack.
/// A macro so that it can be part of a `const` statement text.
macro_rules! after_applock {
    ($status:literal) => {
        concat!(
            "IF ",
            $status,
            " < 0 AND SERVERPROPERTY(N'Babelfish') IS NOT NULL
BEGIN
    BEGIN TRY
        THROW 50000, N'clears the error stack after a refused application lock', 1;
    END TRY
    BEGIN CATCH
    END CATCH;
END;"
        )
    };
}

pub(crate) use after_applock;
