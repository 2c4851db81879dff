//! A store seen through read-only credentials: every write and delete is
//! refused as the store refuses them, reads pass through. The artefact
//! tests prove a reader needs nothing more.

use std::sync::Arc;

use async_trait::async_trait;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{
    CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

/// `inner`, read-only.
#[derive(Debug)]
pub struct ReadOnlyStore {
    /// The store the objects really live in.
    pub inner: Arc<dyn ObjectStore>,
}

fn denied(path: &Path) -> Error {
    Error::PermissionDenied {
        path: path.to_string(),
        source: "these credentials only read".into(),
    }
}

impl std::fmt::Display for ReadOnlyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadOnlyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for ReadOnlyStore {
    async fn put_opts(&self, location: &Path, _: PutPayload, _: PutOptions) -> Result<PutResult> {
        Err(denied(location))
    }

    async fn put_multipart_opts(&self, location: &Path, _: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        Err(denied(location))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        locations.map(|location| Err(denied(&location?))).boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, _: &Path, to: &Path, _: CopyOptions) -> Result<()> {
        Err(denied(to))
    }
}
