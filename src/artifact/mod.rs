//! Fenced artefacts: results too big for a row, uploaded create-only to an
//! object store (S3, Azure Blob, GCS, a folder, memory) and published as a
//! pointer through the fence.
//!
//! The fence protects the row, not the blob: a stale worker that overwrote a
//! shared blob has done the damage before the database refuses its publish.
//! So each upload goes under a name nobody else uses,
//! `{prefix}/{escaped key}/{generation}/{operation id}`, with a create-only
//! put (never an overwrite); then a [`Pointer`] to it (location, size,
//! SHA-256, e_tag and version) is published through the ordinary fenced
//! publish under the same lease. Readers follow the published pointer only
//! ([`ArtifactReader::read_artifact`]) and never discover an unpublished
//! upload; an upload whose publish was refused is an orphan, deleted at once
//! when it can be and otherwise by [`sweep`](mod@sweep).
//!
//! A store is published to only once it has refused a second create-only
//! write of one probe object ([`prove_create_only`]): some S3-compatible
//! stores accept the condition and ignore it. A process that only reads
//! opens an [`ArtifactReader`], which writes nothing and needs only read
//! rights.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use fencepost::artifact::{ArtifactStore, FencedArtifact, Produced};
//! use fencepost::Client;
//!
//! # async fn service() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::connect("Server=tcp:db,1433;Database=app;User ID=svc;Password=...;Encrypt=true").await?;
//! let store = ArtifactStore::open("s3://reports-bucket", "fenced").await?;
//! let run = store
//!     .run_fenced(&client, "report:daily", Duration::from_secs(60), |_stop| async {
//!         Ok::<_, std::io::Error>(Produced::new(b"a big report".to_vec()))
//!     })
//!     .await?;
//! if let FencedArtifact::Published(published) = run {
//!     println!("published {}", published.pointer.location);
//! }
//! let artifact = store.read_artifact(&client, "report:daily").await?;
//! println!("{} bytes", artifact.bytes.len());
//! # Ok(())
//! # }
//! ```

mod error;
mod fence;
mod layout;
mod limits;
mod marker;
mod outcome;
mod pointer;
mod probe;
mod publish;
mod read;
mod reader;
mod run;
mod settle;
mod store;
mod store_url;
pub mod sweep;
mod upload;

pub use error::ArtifactError;
pub use layout::{ArtifactPath, escape_key, unescape_key};
pub use outcome::{Orphan, PublishedArtifact};
pub use pointer::{POINTER_FORMAT, Pointer};
pub use probe::{CreateOnlyProof, CreateRefusal, prove_create_only};
pub use publish::{ArtifactPublish, Produced};
pub use read::Artifact;
pub use reader::ArtifactReader;
pub use run::FencedArtifact;
pub use settle::{SettledArtifact, UnsettledArtifact};
pub use store::ArtifactStore;
pub use store_url::{join_prefix, open_url, redact_url};
pub use sweep::{
    Deleted, DeletedBecause, Kept, KeptBecause, KeyState, Publications, Sweep, SweepEvent, SweepReport, SweptObject,
};

/// The object store interface artefacts are kept in, re-exported so a user
/// names the same version this crate was built with (to pass a store of
/// their own to [`ArtifactStore::new`]).
pub use object_store;
