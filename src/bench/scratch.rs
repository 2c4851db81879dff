//! The scratch table the `raw_update` and `applock_cycle` baselines write: the
//! shape of `fence.Resource`, one row per worker and baseline, made for the
//! run and dropped after it.

use uuid::Uuid;

use super::keys::RunKeys;
use crate::Connection;

/// A created scratch table and the owner id of its rows.
#[derive(Clone, Debug)]
pub(crate) struct Scratch {
    pub table: String,
    pub owner: Uuid,
}

impl Scratch {
    /// Creates the table with a held, unexpired lease on each row, so the
    /// conditional UPDATE succeeds every time, as a live holder's would.
    /// An error means the login may not create it: the caller skips.
    pub(crate) async fn create(
        admin: &mut Connection,
        keys: &RunKeys,
        workers: usize,
    ) -> Result<Scratch, tiberius::error::Error> {
        let scratch = Scratch {
            table: keys.scratch_table(),
            owner: Uuid::new_v4(),
        };
        let create = format!(
            "CREATE TABLE {} (\
                ResourceKey nvarchar(256) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY, \
                Generation bigint NOT NULL, Owner uniqueidentifier NULL, LeaseUntilUtc datetime2(7) NULL, \
                PublishedGeneration bigint NULL, Payload nvarchar(max) NULL, PublishedAtUtc datetime2(7) NULL);",
            scratch.table
        );
        admin.simple_query(create).await?.into_results().await?;
        let insert = format!(
            "INSERT INTO {} (ResourceKey, Generation, Owner, LeaseUntilUtc) \
             VALUES (@P1, 1, @P2, DATEADD(day, 1, SYSUTCDATETIME()));",
            scratch.table
        );
        for workload in ["raw_update", "applock_cycle"] {
            for worker in 0..workers {
                let key = keys.key(workload, Some(worker));
                if let Err(error) = admin.execute(insert.as_str(), &[&key, &scratch.owner]).await {
                    // The table exists: never leave it behind.
                    let _ = scratch.drop(admin).await;
                    return Err(error);
                }
            }
        }
        Ok(scratch)
    }

    pub(crate) async fn drop(&self, admin: &mut Connection) -> Result<(), tiberius::error::Error> {
        let sql = format!("DROP TABLE {};", self.table);
        admin.simple_query(sql).await?.into_results().await?;
        Ok(())
    }
}
