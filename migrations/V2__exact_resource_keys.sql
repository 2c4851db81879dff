-- Keys are exact identifiers (contract v1.1), as sp_getapplock's resource
-- names are: `Job` and `job` are two fences. The key columns compare binary
-- instead of under the database's (usually case-insensitive) collation.
--
-- The two tables are rebuilt rather than altered: Babelfish cannot change a
-- column's collation in place. Rows are kept as they are, and stay unique: two
-- keys equal under the old collation could not both exist. The copies are
-- ordinary tables, not temporary ones, because `fencepost script` runs each
-- batch in an EXEC of its own, where a temporary table would not outlive it.

SELECT * INTO fence.V2_Resource FROM fence.Resource;
SELECT * INTO fence.V2_PublishedOperation FROM fence.PublishedOperation;
GO

DROP TABLE fence.PublishedOperation;
DROP TABLE fence.Resource;
GO

CREATE TABLE fence.Resource
(
    -- Compared binary: an exact identifier.
    ResourceKey         nvarchar(256) COLLATE Latin1_General_100_BIN2 NOT NULL,
    -- Raised by every acquisition and by ForceRelease; never lowered.
    Generation          bigint           NOT NULL,
    -- NULL while nobody holds the lease.
    Owner               uniqueidentifier NULL,
    -- Server clock (UTC). A lease is live while LeaseUntilUtc > SYSUTCDATETIME().
    LeaseUntilUtc       datetime2(7)     NULL,
    -- The generation whose result Payload is; NULL until the first publish.
    PublishedGeneration bigint           NULL,
    Payload             nvarchar(max)    NULL,
    PublishedAtUtc      datetime2(7)     NULL,
    ProvisionedAtUtc    datetime2(7)     NOT NULL,
    CONSTRAINT PK_Resource PRIMARY KEY (ResourceKey),
    CONSTRAINT CK_Resource_Generation CHECK (Generation >= 0),
    CONSTRAINT CK_Resource_PublishedGeneration CHECK (PublishedGeneration <= Generation),
    CONSTRAINT CK_Resource_HolderHasExpiry CHECK (Owner IS NULL OR LeaseUntilUtc IS NOT NULL)
);
GO

CREATE TABLE fence.PublishedOperation
(
    OperationId    uniqueidentifier NOT NULL,
    ResourceKey    nvarchar(256) COLLATE Latin1_General_100_BIN2 NOT NULL,
    Generation     bigint           NOT NULL,
    PublishedAtUtc datetime2(7)     NOT NULL,
    CONSTRAINT PK_PublishedOperation PRIMARY KEY (OperationId),
    CONSTRAINT UQ_PublishedOperation_Generation UNIQUE (ResourceKey, Generation)
);
GO

-- Babelfish 4.2 cannot check a foreign key between binary-collated columns
-- ("could not determine which collation to use"), so there it is left out:
-- Publish records only operations on the row it has just locked and updated.
IF SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'ALTER TABLE fence.PublishedOperation
              ADD CONSTRAINT FK_PublishedOperation_Resource FOREIGN KEY (ResourceKey)
                  REFERENCES fence.Resource (ResourceKey);');
GO

INSERT INTO fence.Resource
    (ResourceKey, Generation, Owner, LeaseUntilUtc, PublishedGeneration, Payload, PublishedAtUtc, ProvisionedAtUtc)
SELECT ResourceKey, Generation, Owner, LeaseUntilUtc, PublishedGeneration, Payload, PublishedAtUtc, ProvisionedAtUtc
  FROM fence.V2_Resource;

INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc)
SELECT OperationId, ResourceKey, Generation, PublishedAtUtc
  FROM fence.V2_PublishedOperation;

DROP TABLE fence.V2_PublishedOperation;
DROP TABLE fence.V2_Resource;
