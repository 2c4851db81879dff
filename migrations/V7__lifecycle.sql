-- Contract v1.6: a lifecycle. An operator retires a key (fence_admin.Retire:
-- its fence row, its publish records and its history go) and prunes outcome
-- records older than a replay window (fence_admin.PruneOutcomes).
--
-- A key's generation must never go back, or a holder of a retired generation,
-- a replayed publish or the artefact sweep could take a generation issued
-- before for a new one. So a retirement raises one high-water mark, kept in a
-- single row whatever the number of keys retired, and a key provisioned later
-- (the retired one again, or any other) starts at it or above, as a key
-- provisioned after a recovery starts at the recovery's floor
-- (fence_api.Provision).

CREATE TABLE fence.Retirement
(
    Singleton         tinyint      NOT NULL,
    -- The highest generation any retired key had reached; 0 until one is
    -- retired. Never lowered.
    HighestGeneration bigint       NOT NULL,
    -- How many retirements raised or kept it, and when the last one ran.
    KeysRetired       bigint       NOT NULL,
    LastRetiredAtUtc  datetime2(7) NULL,
    CONSTRAINT PK_Retirement PRIMARY KEY (Singleton),
    CONSTRAINT CK_Retirement_Singleton CHECK (Singleton = 1),
    CONSTRAINT CK_Retirement_HighestGeneration CHECK (HighestGeneration >= 0)
);
GO

INSERT INTO fence.Retirement (Singleton, HighestGeneration, KeysRetired) VALUES (1, 0, 0);
GO

-- Retire is an operator command with an operation id, like ForceRelease.
ALTER TABLE fence.OperatorOperation DROP CONSTRAINT CK_OperatorOperation_Command;
GO

ALTER TABLE fence.OperatorOperation DROP CONSTRAINT CK_OperatorOperation_Outcome;
GO

ALTER TABLE fence.OperatorOperation ADD CONSTRAINT CK_OperatorOperation_Command
    CHECK (Command IN (N'ForceRelease', N'ResetSourceVersion', N'Retire'));
GO

ALTER TABLE fence.OperatorOperation ADD CONSTRAINT CK_OperatorOperation_Outcome
    CHECK (Outcome IN (N'Fenced', N'Reset', N'NotProvisioned', N'Retired'));
GO

-- Pruning deletes outcome records by age: without these every batch would
-- scan its whole table. (A retirement keeps a key's operator records, whose
-- replays must answer after the key is provisioned again, so it needs no
-- index on their key.) Each costs one more index row per publish or operator
-- command.
CREATE INDEX IX_PublishedOperation_PublishedAtUtc ON fence.PublishedOperation (PublishedAtUtc);
GO

CREATE INDEX IX_OperatorOperation_RecordedAtUtc ON fence.OperatorOperation (RecordedAtUtc);
