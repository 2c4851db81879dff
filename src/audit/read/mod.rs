//! Takes a [`Catalog`] snapshot from a live database: one batch of catalog
//! queries, one round trip, however many objects the database holds.
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
use queries::queries;

/// Reads the catalog of the connection's current database.
///
/// All queries go to the server as one batch; only when that batch fails
/// (an engine without one of the views) are they sent one by one, so that
/// the views the engine has still count. A required view that fails is an
/// error; an optional one leaves its part of the snapshot `None`.
pub async fn read_catalog(connection: &mut Connection) -> Result<Catalog, AuditError> {
    read_catalog_counted(connection).await.map(|(catalog, _)| catalog)
}

/// [`read_catalog`], also returning how many round trips it took: 1, unless
/// the engine failed the batch and the queries went one by one.
pub async fn read_catalog_counted(connection: &mut Connection) -> Result<(Catalog, usize), AuditError> {
    let queries = queries();
    let batch: String = queries.iter().map(|q| format!("{};\n", q.sql)).collect();
    let mut round_trips = 1;
    let results: Vec<Option<Vec<Row>>> = match run(connection, &batch).await {
        Ok(sets) if sets.len() == queries.len() => sets.into_iter().map(Some).collect(),
        _ => {
            let mut sets = Vec::with_capacity(queries.len());
            for q in &queries {
                round_trips += 1;
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
            sets
        }
    };
    build(&queries, results).map(|catalog| (catalog, round_trips))
}

async fn run(connection: &mut Connection, sql: &str) -> tiberius::Result<Vec<Vec<Row>>> {
    connection.simple_query(sql).await?.into_results().await
}
