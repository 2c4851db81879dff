//! A store as a case-insensitive, case-preserving file system (APFS, NTFS,
//! SMB) lays out its folders, over the in-memory store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fencepost::artifact::object_store::memory::InMemory;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result,
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

/// A folder on a case-insensitive, case-preserving file system (APFS,
/// NTFS, SMB): a directory is created with the spelling of its first
/// writer, and every later path that differs from it only in case lands in
/// it. Listing shows the spelling on disk.
#[derive(Debug)]
pub struct CaseInsensitive {
    inner: InMemory,
    /// Lower-cased path prefix -> its spelling on disk.
    spelt: Arc<Mutex<HashMap<String, String>>>,
}

impl CaseInsensitive {
    pub fn new() -> Self {
        CaseInsensitive {
            inner: InMemory::new(),
            spelt: Arc::default(),
        }
    }

    fn on_disk(spelt: &Mutex<HashMap<String, String>>, path: &Path, create: bool) -> Path {
        let mut spelt = spelt.lock().unwrap();
        let mut actual = String::new();
        for part in path.parts() {
            let candidate = if actual.is_empty() {
                part.as_ref().to_string()
            } else {
                format!("{actual}/{}", part.as_ref())
            };
            let folded = candidate.to_lowercase();
            actual = match spelt.get(&folded) {
                Some(existing) => existing.clone(),
                None => {
                    if create {
                        spelt.insert(folded, candidate.clone());
                    }
                    candidate
                }
            };
        }
        Path::from(actual)
    }
}

impl std::fmt::Display for CaseInsensitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CaseInsensitive")
    }
}

#[async_trait]
impl ObjectStore for CaseInsensitive {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let at = Self::on_disk(&self.spelt, location, true);
        self.inner.put_opts(&at, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        let at = Self::on_disk(&self.spelt, location, true);
        self.inner.put_multipart_opts(&at, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let at = Self::on_disk(&self.spelt, location, false);
        self.inner.get_opts(&at, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        let spelt = self.spelt.clone();
        self.inner.delete_stream(
            locations
                .map(move |l| l.map(|l| Self::on_disk(&spelt, &l, false)))
                .boxed(),
        )
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let prefix = prefix.map(|p| Self::on_disk(&self.spelt, p, false));
        self.inner.list(prefix.as_ref())
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let prefix = prefix.map(|p| Self::on_disk(&self.spelt, p, false));
        self.inner.list_with_delimiter(prefix.as_ref()).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
