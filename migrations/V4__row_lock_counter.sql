-- A counter the procedures raise to lock a fence row before they judge it.
--
-- The lock-first statement must modify the row for its lock to be documented
-- to last until the transaction ends on every engine the fence runs on:
-- "A transaction always gets an exclusive lock on any data it modifies, and
-- holds that lock until the transaction completes, regardless of the isolation
-- level" (SET TRANSACTION ISOLATION LEVEL), and under optimized locking (on by
-- default in Azure SQL Database) "Every transaction modifying a row stamps that
-- row with its TID" and "The only lock held until the end of transaction is
-- the single X lock on the TID resource" (Optimized locking). An update that
-- sets a column to its own value modifies nothing, and whether it stamps the
-- row is not documented; raising this counter always does.
--
-- The value means nothing else: it only ever rises, by one per lock, and a
-- bigint does not run out at any rate a fence row is locked.
ALTER TABLE fence.Resource ADD LockCount bigint NOT NULL CONSTRAINT DF_Resource_LockCount DEFAULT 0;
GO

-- One row that nothing ever writes. A procedure called inside a caller's
-- transaction reads it once, at the caller's isolation level, before it
-- switches to READ COMMITTED: "A transaction starts the first time it
-- accesses data", and "A transaction cannot be set to SNAPSHOT isolation
-- level that started with another isolation level" (SET TRANSACTION ISOLATION
-- LEVEL). Without that read, a SNAPSHOT transaction whose first data access is
-- a fence call would start at READ COMMITTED, and the caller's next statement
-- would fail with 3951. Under SERIALIZABLE the read holds a range lock on a
-- table nobody writes, which blocks nobody.
CREATE TABLE fence.Anchor
(
    Singleton tinyint NOT NULL,
    CONSTRAINT PK_Anchor PRIMARY KEY (Singleton),
    CONSTRAINT CK_Anchor_Singleton CHECK (Singleton = 1)
);
GO

INSERT INTO fence.Anchor (Singleton) VALUES (1);
