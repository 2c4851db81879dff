//! fencepost's integration tests, one binary: a test's path says what it
//! needs. `offline::` tests need nothing but this checkout; `live::` tests
//! need the engine named by `FENCEPOST_TEST_MSSQL` and print a skip line
//! without one. `support` holds what both share: the test database, the
//! binary under test, the fault proxy, the raw callers and the fixtures.

mod live;
mod offline;
mod support;
