-- Operators' records: the history of every lease (fence.Tenure), who deployed
-- what (fence.Deployment), the database identity the fence was deployed on
-- (fence.DatabaseIdentity), and the recoveries run after a restore
-- (fence.Recovery). Like the other fence tables they are granted to nobody:
-- the procedures write the tenure history and recoveries, the runner writes
-- the deployments and the identity.

-- When the current generation was acquired; NULL for a generation nobody has
-- held (after ForceRelease or Recover) and for leases taken before this version.
ALTER TABLE fence.Resource ADD AcquiredAtUtc datetime2(7) NULL;
GO

-- One row per ended tenure (a generation that somebody held), written in the
-- same transaction as the change that ended it and never updated afterwards;
-- `fencepost lease prune` deletes the oldest. The tenure still open is the one
-- in fence.Resource. The owner is kept only as SHA-256 of its upper-case text,
-- so a reader of the history can never present a holder's owner id.
CREATE TABLE fence.Tenure
(
    ResourceKey   nvarchar(256) COLLATE Latin1_General_100_BIN2 NOT NULL,
    Generation    bigint        NOT NULL,
    OwnerHash     binary(32)    NOT NULL,
    -- NULL for a tenure that began before the history existed.
    AcquiredAtUtc datetime2(7)  NULL,
    -- For an Expired tenure, the moment its lease ran out.
    EndedAtUtc    datetime2(7)  NOT NULL,
    -- Released: given back by its holder (Release, or Publish with @Release = 1).
    -- Expired: the lease ran out before anything else ended it.
    -- ForceReleased: ended by an operator while live.
    -- Superseded: voided while live by a recovery after a restore.
    Ending        nvarchar(32)  NOT NULL,
    -- 1 when a publish of this generation was accepted.
    Published     bit           NOT NULL,
    CONSTRAINT PK_Tenure PRIMARY KEY (ResourceKey, Generation),
    CONSTRAINT CK_Tenure_Ending CHECK (Ending IN (N'Released', N'Expired', N'ForceReleased', N'Superseded'))
);
GO

-- Pruning deletes by age.
CREATE INDEX IX_Tenure_EndedAtUtc ON fence.Tenure (EndedAtUtc);
GO

-- One row per successful `fencepost migrate`: who ran it, when, with which
-- version of fencepost, and what it changed.
CREATE TABLE fence.Deployment
(
    DeploymentId       int           IDENTITY(1, 1) NOT NULL,
    DeployedAtUtc      datetime2(7)  NOT NULL,
    LoginName          nvarchar(128) NOT NULL,
    FencepostVersion   nvarchar(64)  NOT NULL,
    MigrationsApplied  int           NOT NULL,
    ProceduresApplied  int           NOT NULL,
    -- The database's recovery fork when the deploy ran; NULL where the engine
    -- does not show one.
    DatabaseIdentity   uniqueidentifier NULL,
    CONSTRAINT PK_Deployment PRIMARY KEY (DeploymentId)
);
GO

-- The database identity the fence's generations belong to (on SQL Server the
-- recovery fork of sys.database_recovery_status), in a single row. The first
-- deploy that can read it records it; a deploy never changes it. Only
-- `fencepost lease recover` acknowledges a new identity, after raising every
-- generation: until then `check` and `status` report the database as restored
-- or failed over.
CREATE TABLE fence.DatabaseIdentity
(
    Singleton        tinyint          NOT NULL,
    RecoveryForkGuid uniqueidentifier NOT NULL,
    RecordedAtUtc    datetime2(7)     NOT NULL,
    -- N'deploy' or N'recover'.
    RecordedBy       nvarchar(16)     NOT NULL,
    CONSTRAINT PK_DatabaseIdentity PRIMARY KEY (Singleton),
    CONSTRAINT CK_DatabaseIdentity_Singleton CHECK (Singleton = 1)
);
GO

-- One row per `fencepost lease recover`, keyed by the caller's recovery id so
-- that a repeated recover changes nothing.
CREATE TABLE fence.Recovery
(
    RecoveryId       uniqueidentifier NOT NULL,
    RecoveredAtUtc   datetime2(7)     NOT NULL,
    -- Every resource's generation was raised to this; the next acquisition
    -- gets a higher one.
    GenerationFloor  bigint           NOT NULL,
    LeasesVoided     int              NOT NULL,
    DatabaseIdentity uniqueidentifier NULL,
    CONSTRAINT PK_Recovery PRIMARY KEY (RecoveryId)
);
