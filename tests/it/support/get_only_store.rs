//! A store that answers a read of a missing object as S3 does to
//! credentials that may not list the bucket: 403, not 404.

use std::sync::Arc;

use async_trait::async_trait;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{
    CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures_util::stream::BoxStream;

/// GetObject rights only, the usual "read-only" S3 policy: a missing
/// object reads as 403 (no s3:ListBucket).
#[derive(Debug)]
pub struct GetOnly {
    pub inner: Arc<dyn ObjectStore>,
}

impl std::fmt::Display for GetOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GetOnly")
    }
}

#[async_trait]
impl ObjectStore for GetOnly {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner
            .get_opts(location, options)
            .await
            .map_err(|error| match error {
                Error::NotFound { path, .. } => Error::PermissionDenied {
                    path,
                    source: "403 AccessDenied (no s3:ListBucket)".into(),
                },
                other => other,
            })
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
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
