//! Proving a store refuses to replace an object written create-only, before
//! publishing to it. Each artefact's name is its publish's alone, so no two
//! publishes ever write one name; the create-only write is what makes an
//! artefact, once written, unchangeable in the store, and some S3-compatible
//! stores (and proxies, and emulators) accept the condition and ignore it.
//!
//! The probe also shows what else a publisher relies on: that the login may
//! delete (a refused publish deletes its upload), and how far the store's
//! clock, which dates every object, is from this host's.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use uuid::Uuid;

use super::error::ArtifactError;
use super::layout::PROBE_SEGMENT;

/// The probe's first write, which the store must keep.
const FIRST: &[u8] = b"first";

/// The probe's second write, which the store must refuse.
const SECOND: &[u8] = b"second";

/// How a store refused the second create-only write of one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CreateRefusal {
    /// As "already exists" (a local folder, memory, S3 and GCS through
    /// object_store, Azure 409).
    AlreadyExists,
    /// As a failed precondition (HTTP 412), as some stores and proxies
    /// answer a put with `If-None-Match: *`.
    PreconditionFailed,
}

/// What a store showed by its probe ([`prove_create_only`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateOnlyProof {
    /// The probe object's path.
    pub probe: String,
    /// How the second create-only write was refused; the probe then still
    /// held the first write's bytes.
    pub refused_as: CreateRefusal,
    /// The store's clock minus this host's, as the probe's last-modified
    /// time shows it: negative when the store's clock is behind (the sweep
    /// then sees objects older than they are). Zero when the time falls
    /// within the first write's round trip, give or take the second to
    /// which stores date objects; otherwise the distance beyond that.
    pub clock_skew: TimeDelta,
    /// How long the first write took, the bound on how closely
    /// `clock_skew` could be measured.
    pub round_trip: Duration,
    /// Why the probe could not be deleted, when it could not: this login
    /// cannot delete here, so a refused publish leaves its upload and the
    /// sweep cannot remove it either. `None` when it was deleted.
    pub probe_left: Option<String>,
}

/// Writes a probe object under `prefix` create-only twice: the store must
/// take the first write, refuse the second (as "already exists" or as a
/// failed precondition) and still hold the first write's bytes. A store that
/// takes the second is refused ([`ArtifactError::CreateNotEnforced`]), one
/// that refuses it but changes or loses the object too
/// ([`ArtifactError::ProbeNotKept`]), one without create-only writes as well
/// ([`ArtifactError::CreateUnsupported`]).
///
/// The probe is then deleted; a failed delete is reported in the proof
/// (`probe_left`), not as an error, and the sweep removes a probe left
/// behind when it can.
pub async fn prove_create_only(store: &dyn ObjectStore, prefix: &Path) -> Result<CreateOnlyProof, ArtifactError> {
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
    let before = Utc::now();
    let started = std::time::Instant::now();
    match store.put_opts(&probe, PutPayload::from_static(FIRST), create()).await {
        Ok(_) => {}
        Err(source @ (object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. })) => {
            return Err(ArtifactError::CreateUnsupported {
                store: store.to_string(),
                source,
            });
        }
        Err(source) => return Err(failed(source)),
    }
    let round_trip = started.elapsed();
    let after = Utc::now();
    let second = store.put_opts(&probe, PutPayload::from_static(SECOND), create()).await;
    // Read back whatever the second write answered: a store that says
    // "exists" may have written anyway, and one that took the second write
    // is refused whatever it holds now.
    let read_back = read(store, &probe).await;
    let probe_left = match store.delete(&probe).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => None,
        Err(error) => {
            tracing::warn!(probe = %probe, %error, "the store's probe could not be deleted");
            Some(error.to_string())
        }
    };
    let refused_as = match second {
        Err(object_store::Error::AlreadyExists { .. }) => CreateRefusal::AlreadyExists,
        Err(object_store::Error::Precondition { .. }) => CreateRefusal::PreconditionFailed,
        Ok(_) => {
            return Err(ArtifactError::CreateNotEnforced {
                store: store.to_string(),
                probe: probe.to_string(),
            });
        }
        Err(source) => return Err(failed(source)),
    };
    let last_modified = match read_back {
        Ok(ReadBack::Held { bytes, last_modified }) if bytes == FIRST => last_modified,
        Ok(read_back) => {
            return Err(ArtifactError::ProbeNotKept {
                store: store.to_string(),
                probe: probe.to_string(),
                found: read_back.describe(),
            });
        }
        Err(source) => return Err(failed(source)),
    };
    Ok(CreateOnlyProof {
        probe: probe.to_string(),
        refused_as,
        clock_skew: clock_skew(last_modified, before, after),
        round_trip,
        probe_left,
    })
}

/// What reading the probe back found.
enum ReadBack {
    Held {
        bytes: bytes::Bytes,
        last_modified: DateTime<Utc>,
    },
    Gone,
}

impl ReadBack {
    /// What was found, for [`ArtifactError::ProbeNotKept`].
    fn describe(&self) -> String {
        match self {
            ReadBack::Held { bytes, .. } if bytes.as_ref() == SECOND => "the second write's bytes".into(),
            ReadBack::Held { bytes, .. } => format!("{} bytes that neither write made", bytes.len()),
            ReadBack::Gone => "no object at all".into(),
        }
    }
}

async fn read(store: &dyn ObjectStore, probe: &Path) -> Result<ReadBack, object_store::Error> {
    let got = match store.get(probe).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(ReadBack::Gone),
        Err(error) => return Err(error),
    };
    let last_modified = got.meta.last_modified;
    Ok(ReadBack::Held {
        bytes: got.bytes().await?,
        last_modified,
    })
}

/// The store's clock minus this host's, from the time the store gave an
/// object written between `before` and `after` on this host's clock: how
/// far `last_modified` lies outside that span, zero inside it.
fn clock_skew(last_modified: DateTime<Utc>, before: DateTime<Utc>, after: DateTime<Utc>) -> TimeDelta {
    // Stores date objects coarsely, never ahead of the write: HTTP dates
    // (S3, Azure, GCS) are cut to whole seconds, a file system's times lag
    // by up to a clock tick. So the write may have been up to that after
    // the time given.
    let latest = last_modified + STORE_TIME_RESOLUTION;
    if latest < before {
        latest - before
    } else if last_modified > after {
        last_modified - after
    } else {
        TimeDelta::zero()
    }
}

/// How far behind a write the time a store gives it may be, its clock aside.
const STORE_TIME_RESOLUTION: TimeDelta = TimeDelta::seconds(1);

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(seconds: i64, millis: u32) -> DateTime<Utc> {
        Utc.timestamp_opt(seconds, millis * 1_000_000).unwrap()
    }

    #[test]
    fn a_store_time_within_the_write_is_no_skew_and_one_outside_it_is_the_distance() {
        let (before, after) = (at(100, 200), at(100, 400));
        assert_eq!(clock_skew(at(100, 300), before, after), TimeDelta::zero());
        // A time up to a second behind is the store's resolution.
        assert_eq!(clock_skew(at(100, 0), before, after), TimeDelta::zero());
        assert_eq!(clock_skew(at(99, 300), before, after), TimeDelta::zero());
        assert_eq!(clock_skew(at(95, 100), before, after), TimeDelta::milliseconds(-4_100));
        assert_eq!(clock_skew(at(90, 0), before, after), TimeDelta::milliseconds(-9_200));
        assert_eq!(clock_skew(at(130, 400), before, after), TimeDelta::seconds(30));
    }
}
