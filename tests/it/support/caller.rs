//! A caller that runs the procedures the way a service's own code does: on a
//! connection of its own, inside a transaction it opened itself at an
//! isolation level it chose, with raw EXECs rather than the client.

use fencepost::Connection;
use tiberius::{Row, ToSql};
use uuid::Uuid;

/// The isolation levels a caller's stack may pick; SERIALIZABLE is the
/// default of .NET's `TransactionScope`.
pub const LEVELS: [&str; 5] = [
    "READ UNCOMMITTED",
    "READ COMMITTED",
    "REPEATABLE READ",
    "SERIALIZABLE",
    "SNAPSHOT",
];

pub const ACQUIRE: &str = "EXEC fence_api.Acquire @ResourceKey = @P1, @Owner = @P2, @LeaseSeconds = @P3";
pub const RENEW: &str = "EXEC fence_api.Renew @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @LeaseSeconds = @P4";
pub const PUBLISH: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                           @OperationId = @P4, @Payload = @P5";
pub const RELEASE: &str = "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";
pub const INSPECT: &str = "EXEC fence_api.Inspect @ResourceKey = @P1";
pub const READ_PUBLICATION: &str = "EXEC fence_api.ReadPublication @ResourceKey = @P1";
pub const GET_OUTCOME: &str = "EXEC fence_api.GetOutcome @OperationId = @P1";

/// One session of a caller's own.
pub struct Caller {
    pub conn: Connection,
}

/// What a procedure answered: its one row, or the error the server raised.
#[derive(Debug)]
pub enum Answer {
    Row(Row),
    Error { number: u32, message: String },
}

impl Answer {
    /// The `Outcome` column, or a panic naming the error instead.
    pub fn outcome(&self) -> String {
        match self {
            Answer::Row(row) => row.get::<&str, _>("Outcome").expect("an Outcome").to_string(),
            Answer::Error { number, message } => panic!("expected an outcome, got error {number}: {message}"),
        }
    }

    /// A bigint column of the row.
    pub fn big(&self, column: &str) -> Option<i64> {
        match self {
            Answer::Row(row) => row.get::<i64, _>(column),
            Answer::Error { number, message } => panic!("expected a row, got error {number}: {message}"),
        }
    }

    /// A datetime2 column of the row.
    pub fn time(&self, column: &str) -> Option<time::PrimitiveDateTime> {
        match self {
            Answer::Row(row) => row.get::<time::PrimitiveDateTime, _>(column),
            Answer::Error { number, message } => panic!("expected a row, got error {number}: {message}"),
        }
    }

    /// The number of the error the server raised, if any.
    pub fn error_number(&self) -> Option<u32> {
        match self {
            Answer::Row(_) => None,
            Answer::Error { number, .. } => Some(*number),
        }
    }
}

impl Caller {
    pub fn new(conn: Connection) -> Caller {
        Caller { conn }
    }

    /// Runs a batch to the end and returns the error, if any.
    pub async fn batch(&mut self, sql: &str) -> Result<(), tiberius::error::Error> {
        self.conn.simple_query(sql).await?.into_results().await.map(drop)
    }

    /// Opens a transaction at `level`, as a service's own code would.
    pub async fn begin(&mut self, level: &str) -> Result<(), tiberius::error::Error> {
        self.batch(&format!("SET TRANSACTION ISOLATION LEVEL {level}; BEGIN TRANSACTION;"))
            .await
    }

    /// Commits when a transaction is still open (a procedure's error may have
    /// rolled it back already).
    pub async fn commit(&mut self) -> Result<(), tiberius::error::Error> {
        self.batch("IF @@TRANCOUNT > 0 COMMIT TRANSACTION;").await
    }

    pub async fn rollback(&mut self) {
        self.batch("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;")
            .await
            .expect("rollback");
    }

    /// The number of open transactions of this session.
    pub async fn trancount(&mut self) -> i32 {
        self.int("SELECT @@TRANCOUNT").await
    }

    /// This session's id, as KILL and the session views name it.
    pub async fn spid(&mut self) -> i32 {
        self.int("SELECT CAST(@@SPID AS int)").await
    }

    /// The one int that `sql` answers.
    async fn int(&mut self, sql: &str) -> i32 {
        let row = self
            .conn
            .simple_query(sql)
            .await
            .unwrap()
            .into_row()
            .await
            .unwrap()
            .unwrap();
        row.get::<i32, _>(0).unwrap()
    }

    /// The server's current time.
    pub async fn server_now(&mut self) -> time::PrimitiveDateTime {
        let row = self
            .conn
            .simple_query("SELECT SYSUTCDATETIME()")
            .await
            .unwrap()
            .into_row()
            .await
            .unwrap()
            .unwrap();
        row.get::<time::PrimitiveDateTime, _>(0).unwrap()
    }

    /// Calls a procedure and returns its one row or the server's error.
    /// Network errors panic: they are not what these tests are about.
    pub async fn call(&mut self, sql: &str, args: &[&dyn ToSql]) -> Answer {
        let result = match self.conn.query(sql, args).await {
            Ok(stream) => stream.into_results().await,
            Err(e) => Err(e),
        };
        match result {
            Ok(sets) => {
                let mut rows: Vec<Row> = sets.into_iter().flatten().collect();
                assert_eq!(rows.len(), 1, "{sql}: exactly one row");
                Answer::Row(rows.remove(0))
            }
            Err(tiberius::error::Error::Server(token)) => Answer::Error {
                number: token.code(),
                message: token.message().to_string(),
            },
            Err(other) => panic!("{sql}: {other}"),
        }
    }

    pub async fn acquire(&mut self, key: &str, owner: Uuid, seconds: i32) -> Answer {
        self.call(ACQUIRE, &[&key, &owner, &seconds]).await
    }

    pub async fn renew(&mut self, key: &str, owner: Uuid, generation: i64, seconds: i32) -> Answer {
        self.call(RENEW, &[&key, &owner, &generation, &seconds]).await
    }

    pub async fn publish(&mut self, key: &str, owner: Uuid, generation: i64, operation: Uuid, payload: &str) -> Answer {
        self.call(PUBLISH, &[&key, &owner, &generation, &operation, &payload])
            .await
    }

    pub async fn inspect(&mut self, key: &str) -> Answer {
        self.call(INSPECT, &[&key]).await
    }
}

/// Why a schedule could not show its outcome on this engine. Only the two
/// documented Babelfish limits qualify; any other failure fails the test.
pub fn engine_limit(babelfish: bool, level: &str, failure: &str) -> Option<String> {
    if !babelfish {
        return None;
    }
    let refused_level =
        matches!(level, "REPEATABLE READ" | "SERIALIZABLE") && failure.to_ascii_lowercase().contains("isolation");
    let snapshot_conflict = level == "SNAPSHOT" && failure.contains("could not serialize access");
    if refused_level {
        Some(format!(
            "Babelfish refuses {level} unless the server maps it to PostgreSQL's: {failure}"
        ))
    } else if snapshot_conflict {
        Some(format!(
            "Babelfish runs SNAPSHOT as PostgreSQL REPEATABLE READ, where updating a row changed after the \
             snapshot always fails, and a procedure cannot change the isolation of a transaction already \
             under way: {failure}"
        ))
    } else {
        None
    }
}
