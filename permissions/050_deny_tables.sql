-- Belt and braces on SQL Server: even if someone later grants these roles
-- rights on the tables, DENY wins. Procedures still work, because ownership
-- chaining skips permission checks on the tables they touch.
-- Babelfish has no DENY (nor ownership chaining), so there the statement is
-- skipped; `fencepost check` reports what that engine cannot show.
IF SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'DENY SELECT, INSERT, UPDATE, DELETE, ALTER, CONTROL, TAKE OWNERSHIP, REFERENCES
                ON SCHEMA::fence TO fence_service, fence_reader, fence_operator, fence_recovery;');
