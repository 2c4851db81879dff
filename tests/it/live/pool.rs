//! The filler of the pool of deployed databases (`support::prepared`):
//! not a test, but the background job `make test` runs beside the tests, as
//! `cargo test --features fake --test it -- --ignored --exact live::pool::prepare_deployed_databases`.

use crate::support::prepared;

#[tokio::test]
#[ignore = "the pool's filler, started by `make test` (tests/with-prepared-databases)"]
async fn prepare_deployed_databases() {
    prepared::fill().await;
}
