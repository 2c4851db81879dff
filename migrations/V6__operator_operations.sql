-- Contract v1.5: operator commands are idempotent by operation id.
--
-- fence_admin.ForceRelease and fence_admin.ResetSourceVersion take an
-- optional @OperationId. A call that names one records here, in the same
-- transaction as its change, what it answered; a replay of that id answers
-- the recorded row again and changes nothing, so an operator (or a client)
-- whose reply was lost can send the same command again without fencing a new
-- holder or lowering a source version a second time. Like the other fence
-- tables it is granted to nobody: only those two procedures write and read it.

CREATE TABLE fence.OperatorOperation
(
    OperationId           uniqueidentifier NOT NULL,
    -- The procedure's name within fence_admin.
    Command               nvarchar(32)     NOT NULL,
    -- Compared binary, as fence.Resource's key (migration V2). No foreign key:
    -- a command on a key with no fence row is recorded too (NotProvisioned),
    -- and Babelfish 4.2 cannot check one between binary-collated columns.
    ResourceKey           nvarchar(256) COLLATE Latin1_General_100_BIN2 NOT NULL,
    -- What the command answered, and answers to every replay.
    Outcome               nvarchar(32)     NOT NULL,
    -- ForceRelease: the generation it fenced the key at; NULL when NotProvisioned.
    Generation            bigint           NULL,
    -- ResetSourceVersion: the source version it was asked to set (NULL clears),
    -- which a replay must name again, and the one it replaced.
    SourceVersion         bigint           NULL,
    PreviousSourceVersion bigint           NULL,
    -- Server clock (UTC), when the command committed.
    RecordedAtUtc         datetime2(7)     NOT NULL,
    CONSTRAINT PK_OperatorOperation PRIMARY KEY (OperationId),
    CONSTRAINT CK_OperatorOperation_Command CHECK (Command IN (N'ForceRelease', N'ResetSourceVersion')),
    CONSTRAINT CK_OperatorOperation_Outcome CHECK (Outcome IN (N'Fenced', N'Reset', N'NotProvisioned'))
);
