//! Takes a [`Catalog`] snapshot from a live database: two batches of
//! catalog queries, two round trips, however many objects the database
//! holds (see `queries` for why two).
//!
//! Each query is declared with the decoder of its answer (`query`), in the
//! file of what it reads (`database`, `principals`, `permissions`, `objects`,
//! `modules`, `server`, `trustworthy`, `background`); `queries` lists them in
//! batch order and `build` hands each answer to its query's decoder.

mod background;
mod beyond;
mod build;
mod database;
mod foreign_keys;
mod modules;
mod objects;
mod permissions;
mod principals;
mod proxies;
mod queries;
mod query;
mod rows;
mod server;
mod trustworthy;

use tiberius::Row;

use super::AuditError;
use super::catalog::Catalog;
use crate::Connection;
use build::build;
use queries::batches;

/// Reads the catalog of the connection's current database.
///
/// Each batch of queries goes to the server whole; only when a batch fails
/// (an engine without one of the views) are its queries sent one by one, so
/// that the views the engine has still count. A required view that fails is
/// an error; an optional one leaves its part of the snapshot `None`.
pub async fn read_catalog(connection: &mut Connection) -> Result<Catalog, AuditError> {
    read_catalog_counted(connection).await.map(|(catalog, _)| catalog)
}

/// [`read_catalog`], also returning how many round trips it took: one per
/// batch, unless the engine failed a batch and its queries went one by one.
pub async fn read_catalog_counted(connection: &mut Connection) -> Result<(Catalog, usize), AuditError> {
    let batches = batches();
    let mut round_trips = 0;
    let mut results: Vec<Option<Vec<Row>>> = Vec::new();
    for queries in &batches {
        let (sets, trips) = read_batch(connection, queries).await?;
        round_trips += trips;
        results.extend(sets);
    }
    let queries: Vec<_> = batches.into_iter().flatten().collect();
    build(&queries, results).map(|catalog| (catalog, round_trips))
}

/// One batch's answers, one per query, and the round trips they took.
async fn read_batch(
    connection: &mut Connection,
    queries: &[query::Query],
) -> Result<(Vec<Option<Vec<Row>>>, usize), AuditError> {
    let batch: String = queries.iter().map(|q| format!("{};\n", q.sql)).collect();
    if let Ok(sets) = run(connection, &batch).await
        && sets.len() == queries.len()
    {
        return Ok((sets.into_iter().map(Some).collect(), 1));
    }
    let mut sets = Vec::with_capacity(queries.len());
    for q in queries {
        match run(connection, &q.sql).await {
            Ok(mut result) if result.len() == 1 => sets.push(result.pop()),
            Ok(result) if q.required => {
                return Err(AuditError::UnexpectedShape {
                    what: q.what,
                    reason: format!("{} result sets instead of 1", result.len()),
                });
            }
            Err(source) if q.required => {
                return Err(AuditError::Query { what: q.what, source });
            }
            _ => sets.push(None),
        }
    }
    Ok((sets, 1 + queries.len()))
}

async fn run(connection: &mut Connection, sql: &str) -> tiberius::Result<Vec<Vec<Row>>> {
    connection.simple_query(sql).await?.into_results().await
}
