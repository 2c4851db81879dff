//! Proving a store refuses an overwrite before trusting it: some
//! S3-compatible stores (and proxies, and emulators) accept the create-only
//! condition and ignore it, and a stale worker could then overwrite an
//! artefact.

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use uuid::Uuid;

use super::error::ArtifactError;
use super::layout::PROBE_SEGMENT;

/// Writes a probe object under `prefix` create-only twice: the store must
/// take the first and refuse the second as "already exists". A store that
/// takes the second is refused ([`ArtifactError::CreateNotEnforced`]); one
/// without create-only writes too ([`ArtifactError::CreateUnsupported`]).
/// The probe is deleted afterwards; one left behind (a crash, a failed
/// delete) is removed by the sweep.
pub async fn prove_create_only(store: &dyn ObjectStore, prefix: &Path) -> Result<(), ArtifactError> {
    let probe = prefix
        .clone()
        .join(PROBE_SEGMENT)
        .join(Uuid::new_v4().to_string().as_str());
    let create = || PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    };
    let failed = |source| ArtifactError::Store {
        action: "probe",
        path: probe.to_string(),
        source,
    };
    match store
        .put_opts(&probe, PutPayload::from_static(b"first"), create())
        .await
    {
        Ok(_) => {}
        Err(source @ (object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. })) => {
            return Err(ArtifactError::CreateUnsupported {
                store: store.to_string(),
                source,
            });
        }
        Err(source) => return Err(failed(source)),
    }
    let second = store
        .put_opts(&probe, PutPayload::from_static(b"second"), create())
        .await;
    // Best effort: the sweep removes a probe this leaves behind.
    let _ = store.delete(&probe).await;
    match second {
        Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
        Ok(_) => Err(ArtifactError::CreateNotEnforced {
            store: store.to_string(),
            probe: probe.to_string(),
        }),
        Err(source) => Err(failed(source)),
    }
}
