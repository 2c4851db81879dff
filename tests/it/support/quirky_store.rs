//! A store with one quirk of a real store, proxy or emulator, for the tests
//! that prove how fencepost takes it: a create-only write refused as a
//! failed precondition, one refused after it was written anyway, deletes
//! refused, a clock behind this host's, or a body that fails to download.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::TimeDelta;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{
    CopyOptions, Error, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

/// What the store does otherwise than `inner`.
#[derive(Clone, Copy, Debug)]
pub enum Quirk {
    /// A create-only write of an existing object fails as a precondition
    /// (HTTP 412), not as "already exists".
    RefusesAsPrecondition,
    /// A create-only write of an existing object overwrites it, then
    /// answers "already exists".
    OverwritesThenRefuses,
    /// Every delete fails.
    RefusesDeletes,
    /// Every object's last-modified time is this much off this host's.
    ClockOff(TimeDelta),
    /// An object's metadata comes, its body fails: a test sees whether it
    /// was downloaded.
    BodyFails,
}

/// `inner`, with `quirk`.
#[derive(Debug)]
pub struct QuirkyStore {
    /// The store the objects really live in.
    pub inner: Arc<dyn ObjectStore>,
    /// What it does otherwise.
    pub quirk: Quirk,
}

impl std::fmt::Display for QuirkyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "QuirkyStore({:?}, {})", self.quirk, self.inner)
    }
}

#[async_trait]
impl ObjectStore for QuirkyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, mut opts: PutOptions) -> Result<PutResult> {
        match (self.quirk, &opts.mode) {
            (Quirk::RefusesAsPrecondition, PutMode::Create) => self
                .inner
                .put_opts(location, payload, opts)
                .await
                .map_err(|error| match error {
                    Error::AlreadyExists { path, source } => Error::Precondition { path, source },
                    other => other,
                }),
            (Quirk::OverwritesThenRefuses, PutMode::Create) => {
                let existed = self.inner.head(location).await.is_ok();
                opts.mode = PutMode::Overwrite;
                let put = self.inner.put_opts(location, payload, opts).await?;
                if existed {
                    return Err(Error::AlreadyExists {
                        path: location.to_string(),
                        source: "it exists (and was overwritten)".into(),
                    });
                }
                Ok(put)
            }
            _ => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let mut got = self.inner.get_opts(location, options).await?;
        match self.quirk {
            Quirk::ClockOff(by) => got.meta.last_modified += by,
            Quirk::BodyFails => {
                let path = location.to_string();
                got.payload = GetResultPayload::Stream(
                    futures_util::stream::once(async move {
                        Err(Error::Generic {
                            store: "QuirkyStore",
                            source: format!("the body of {path} was downloaded").into(),
                        })
                    })
                    .boxed(),
                );
            }
            _ => {}
        }
        Ok(got)
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        if let Quirk::RefusesDeletes = self.quirk {
            return locations
                .map(|location| {
                    Err(Error::PermissionDenied {
                        path: location?.to_string(),
                        source: "deletes are refused here".into(),
                    })
                })
                .boxed();
        }
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
