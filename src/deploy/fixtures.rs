//! The small shipped tree and the server states the unit tests of `plan` and
//! `run` decide over: two migrations, one procedure, one permission script.

use super::state::{AppliedMigration, ServerProcedure};
use crate::source::Sources;

/// `V1__a`, `V2__b`, `fence_api.P` and `010_roles`.
pub(crate) fn sources() -> Sources {
    Sources::from_files(
        vec![
            ("V1__a.sql".into(), b"SELECT 1;".to_vec()),
            ("V2__b.sql".into(), b"SELECT 2;".to_vec()),
        ],
        vec![(
            "fence_api.P.sql".into(),
            b"CREATE PROCEDURE fence_api.P AS SELECT 1;".to_vec(),
        )],
        vec![("010_roles.sql".into(), b"SELECT 1;".to_vec())],
    )
    .unwrap()
}

/// The history row of `sources`' migration number `index`, as applied.
pub(crate) fn applied(sources: &Sources, index: usize) -> AppliedMigration {
    let m = sources.migrations()[index].migration();
    AppliedMigration {
        version: m.version(),
        name: m.name().to_string(),
        applied_on: "2026-01-01T00:00:00Z".into(),
        checksum: m.checksum(),
    }
}

/// fence_api.P as deployed, its definition now hashing to `server_hash`
/// (`H1` is what was deployed).
pub(crate) fn deployed(sources: &Sources, server_hash: &str) -> ServerProcedure {
    ServerProcedure {
        name: "fence_api.P".into(),
        exists: true,
        definition_hash: Some(server_hash.into()),
        deployed_checksum: Some(sources.procedures()[0].checksum().into()),
        deployed_definition_hash: Some("H1".into()),
    }
}
