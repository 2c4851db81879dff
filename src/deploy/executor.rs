//! refinery's migration driver for fencepost: each migration runs batch by
//! batch (split on `GO`), inside one transaction with its history row, and
//! every result of every batch is read so that no server error is lost.

use std::collections::HashMap;
use std::time::Instant;

use refinery_core::traits::r#async::{AsyncMigrate, AsyncQuery, AsyncTransaction};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::batch::split_batches;
use super::error::DeployError;
use super::session::Session;
use super::sources::MigrationSource;
use super::statements::bootstrap;

/// What the driver tells the caller as it goes.
#[derive(Clone, Debug)]
pub enum MigrationEvent {
    /// A migration is about to run.
    Started(String),
    /// A migration committed.
    Committed {
        /// e.g. `V1__lease_tables`.
        name: String,
        /// How long it took.
        seconds: f64,
    },
}

/// The error refinery sees; the full [`DeployError`] is kept in the driver
/// for the caller, since refinery only passes errors on as text and a box.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(String);

/// A refinery driver over a deploy session.
pub struct MigrationDriver<'s, 'c> {
    session: &'s mut Session<'c>,
    /// Shipped migrations by their SQL text, which is how refinery hands them over.
    by_text: HashMap<String, MigrationSource>,
    on_event: &'s mut (dyn FnMut(MigrationEvent) + Send),
    failure: Option<DeployError>,
    applied: Vec<String>,
}

impl<'s, 'c> MigrationDriver<'s, 'c> {
    /// A driver for `migrations` on `session`.
    pub fn new(
        session: &'s mut Session<'c>,
        migrations: &[MigrationSource],
        on_event: &'s mut (dyn FnMut(MigrationEvent) + Send),
    ) -> Self {
        let by_text = migrations
            .iter()
            .filter_map(|m| Some((m.migration().sql()?.to_string(), m.clone())))
            .collect();
        Self {
            session,
            by_text,
            on_event,
            failure: None,
            applied: Vec::new(),
        }
    }

    /// Names of the migrations this driver committed.
    pub fn applied(&self) -> &[String] {
        &self.applied
    }

    /// The error behind the last failure refinery reported, if any.
    pub fn take_failure(&mut self) -> Option<DeployError> {
        self.failure.take()
    }

    async fn run_in_transaction(&mut self, queries: Vec<&str>) -> Result<usize, DeployError> {
        self.session
            .run("SET XACT_ABORT ON; BEGIN TRANSACTION;")
            .await
            .map_err(DeployError::server("starting a migration transaction"))?;
        let mut migration = None;
        for query in &queries {
            let (file, batches) = match self.by_text.get(*query) {
                Some(shipped) => {
                    (self.on_event)(MigrationEvent::Started(shipped.name()));
                    migration = Some((shipped.name(), Instant::now()));
                    (format!("migrations/{}", shipped.file()), shipped.batches().to_vec())
                }
                None => (
                    "fencepost's migration history".to_string(),
                    split_batches(query).unwrap_or_default(),
                ),
            };
            if let Err(error) = self.session.run_script(&file, &batches).await {
                self.session.roll_back().await;
                return Err(error);
            }
        }
        self.session
            .run("COMMIT TRANSACTION;")
            .await
            .map_err(DeployError::server("committing a migration"))?;
        if let Some((name, started)) = migration {
            (self.on_event)(MigrationEvent::Committed {
                name: name.clone(),
                seconds: started.elapsed().as_secs_f64(),
            });
            self.applied.push(name);
        }
        Ok(queries.len())
    }
}

impl AsyncTransaction for MigrationDriver<'_, '_> {
    type Error = DriverError;

    async fn execute<'a, T: Iterator<Item = &'a str> + Send + 'a>(
        &'a mut self,
        queries: T,
    ) -> Result<usize, Self::Error> {
        let queries: Vec<&str> = queries.collect();
        self.run_in_transaction(queries).await.map_err(|error| {
            let driver_error = DriverError(error.to_string());
            self.failure = Some(error);
            driver_error
        })
    }
}

impl AsyncQuery<Vec<refinery::Migration>> for MigrationDriver<'_, '_> {
    async fn query<'a>(&'a mut self, query: &'a str) -> Result<Vec<refinery::Migration>, Self::Error> {
        let rows = self.session.run(query).await.map_err(|e| DriverError(e.to_string()))?;
        let mut applied = Vec::new();
        for row in rows.iter().flatten() {
            let (Some(version), Some(name), Some(applied_on), Some(checksum)) = (
                row.get::<i32, usize>(0),
                row.get::<&str, usize>(1),
                row.get::<&str, usize>(2),
                row.get::<&str, usize>(3),
            ) else {
                return Err(DriverError(
                    "the migration history has a row with missing values".into(),
                ));
            };
            let applied_on = OffsetDateTime::parse(applied_on, &Rfc3339)
                .map_err(|e| DriverError(format!("migration {version} has an unreadable applied_on: {e}")))?;
            let checksum = checksum
                .parse::<u64>()
                .map_err(|e| DriverError(format!("migration {version} has an unreadable checksum: {e}")))?;
            applied.push(refinery::Migration::applied(
                version,
                name.to_string(),
                applied_on,
                checksum,
            ));
        }
        Ok(applied)
    }
}

impl AsyncMigrate for MigrationDriver<'_, '_> {
    fn assert_migrations_table_query(_migration_table_name: &str) -> String {
        bootstrap()
    }
}
