-- The fence: one row per protected resource holds both the lease (generation,
-- owner, expiry) and the result published under it, so a publish can be a
-- single conditional UPDATE that checks ownership and writes in one step.
--
-- Schema `fence` (and fencepost's migration history in it) is created by the
-- runner before the first migration. Nobody is granted anything on it: services
-- reach these tables only through the procedures in fence_api and fence_admin,
-- which dbo owns like the tables, so ownership chaining lets them through.

CREATE SCHEMA fence_api AUTHORIZATION dbo;
GO

CREATE SCHEMA fence_admin AUTHORIZATION dbo;
GO

CREATE TABLE fence.Resource
(
    ResourceKey         nvarchar(256)    NOT NULL,
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

-- One row per accepted publish: the durable answer to "did my publish commit?"
-- for a caller whose reply was lost, and the guard against a second publish in
-- the same generation.
CREATE TABLE fence.PublishedOperation
(
    OperationId    uniqueidentifier NOT NULL,
    ResourceKey    nvarchar(256)    NOT NULL,
    Generation     bigint           NOT NULL,
    PublishedAtUtc datetime2(7)     NOT NULL,
    CONSTRAINT PK_PublishedOperation PRIMARY KEY (OperationId),
    CONSTRAINT UQ_PublishedOperation_Generation UNIQUE (ResourceKey, Generation),
    CONSTRAINT FK_PublishedOperation_Resource FOREIGN KEY (ResourceKey)
        REFERENCES fence.Resource (ResourceKey)
);
GO

-- The runner's journal of deployed procedures: the checksum of the shipped text
-- (to redeploy only what changed) and a hash of the definition the server held
-- right after the deploy (to detect a procedure edited by hand: drift).
CREATE TABLE fence.DeployedProcedure
(
    ProcedureName  nvarchar(256) NOT NULL,
    SourceChecksum char(64)      NOT NULL,
    DefinitionHash binary(32)    NULL,
    DeployedAtUtc  datetime2(7)  NOT NULL,
    CONSTRAINT PK_DeployedProcedure PRIMARY KEY (ProcedureName)
);
