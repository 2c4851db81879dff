//! What the fake keeps of each fenced transaction: the lease it was fenced
//! by, the statements the work sent, and how it ended. The rows those
//! statements would write are the test's concern, not the fence's.

/// One fenced transaction begun on the fake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedWrite {
    /// The key whose lease fenced it.
    pub key: String,
    /// The generation it was fenced by.
    pub generation: i64,
    /// The work's statements, in the order sent.
    pub statements: Vec<Statement>,
    /// How it ended.
    pub end: WriteEnd,
}

/// A statement the work sent in a fenced transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// Its SQL, as the work wrote it.
    pub sql: String,
    /// Its parameters (`@P1`, `@P2`, ...), as the driver would bind them.
    pub params: Vec<String>,
}

/// How a fenced transaction ended.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteEnd {
    /// Still open.
    Open,
    /// Committed: the lease was held at the commit.
    Committed,
    /// Rolled back: by the work, by a refusal at the commit, or by an
    /// error; nothing of it happened.
    RolledBack,
}
