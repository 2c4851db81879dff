//! What the fence tables hold after a run, for the keys of that run.

use std::collections::BTreeMap;

use fencepost::Connection;
use time::OffsetDateTime;
use uuid::Uuid;

/// What the tables hold after the run.
#[derive(Debug, Default)]
pub struct TableState {
    /// Operation id → (key, generation, published at).
    pub operations: BTreeMap<Uuid, (String, i64, OffsetDateTime)>,
    /// Key → (published generation, payload).
    pub resources: BTreeMap<String, (Option<i64>, Option<String>)>,
}

impl TableState {
    /// Reads the rows of the keys that start with `prefix`.
    pub async fn read(conn: &mut Connection, prefix: &str) -> TableState {
        let mut state = TableState::default();
        let rows = conn
            .query(
                "SELECT OperationId, ResourceKey, Generation, PublishedAtUtc FROM fence.PublishedOperation
                  WHERE ResourceKey LIKE @P1 + N'%'",
                &[&prefix],
            )
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap();
        for row in rows {
            let at: time::PrimitiveDateTime = row.get(3).unwrap();
            state.operations.insert(
                row.get(0).unwrap(),
                (
                    row.get::<&str, _>(1).unwrap().to_string(),
                    row.get(2).unwrap(),
                    at.assume_utc(),
                ),
            );
        }
        let rows = conn
            .query(
                "SELECT ResourceKey, PublishedGeneration, Payload FROM fence.Resource WHERE ResourceKey LIKE @P1 + N'%'",
                &[&prefix],
            )
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap();
        for row in rows {
            state.resources.insert(
                row.get::<&str, _>(0).unwrap().to_string(),
                (row.get(1), row.get::<&str, _>(2).map(str::to_string)),
            );
        }
        state
    }
}
