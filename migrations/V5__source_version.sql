-- Contract v1.4: a publication never goes back to an older source.
--
-- The fence orders holders; it says nothing about the data a holder built
-- from. A current holder may have read an older replica or a lagging feed, so
-- the version of the source a result was built from is carried by the
-- publish and checked in the same conditional update (fence_api.Publish,
-- fence_api.AssertHolder), against the resource's watermark here.

-- The highest source version a publish or a fenced write committed for the
-- resource: NULL until one carried a version. Only an operator lowers or
-- clears it (fence_admin.ResetSourceVersion).
ALTER TABLE fence.Resource ADD SourceVersion bigint NULL
    CONSTRAINT CK_Resource_SourceVersion CHECK (SourceVersion >= 0);
GO

-- The version the current Payload was published with: NULL for an
-- unversioned publish (ReadPublication answers it).
ALTER TABLE fence.Resource ADD PublishedSourceVersion bigint NULL
    CONSTRAINT CK_Resource_PublishedSourceVersion CHECK (PublishedSourceVersion >= 0);
GO

-- The version each accepted publish carried (GetOutcome answers it).
ALTER TABLE fence.PublishedOperation ADD SourceVersion bigint NULL;
GO

-- The version the tenure's accepted publish carried (LeaseHistory).
ALTER TABLE fence.Tenure ADD SourceVersion bigint NULL;
