//! A store that holds an upload back: once armed, a put lands in the real
//! store and then waits until the test lets it return, so a test can put a
//! worker between its upload and its publish and do things there. It can
//! also refuse deletes, to leave an orphan for the sweep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{
    CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::sync::{Notify, mpsc};

/// `inner`, with puts held back and deletes refused once armed.
#[derive(Debug)]
pub struct GatedStore {
    inner: Arc<dyn ObjectStore>,
    armed: AtomicBool,
    refuse_deletes: bool,
    uploaded: mpsc::UnboundedSender<Path>,
    seen: tokio::sync::Mutex<mpsc::UnboundedReceiver<Path>>,
    proceed: Notify,
}

impl GatedStore {
    /// Passes everything through to `inner` until [`arm`](GatedStore::arm)ed.
    pub fn new(inner: Arc<dyn ObjectStore>, refuse_deletes: bool) -> Arc<GatedStore> {
        let (uploaded, seen) = mpsc::unbounded_channel();
        Arc::new(GatedStore {
            inner,
            armed: AtomicBool::new(false),
            refuse_deletes,
            uploaded,
            seen: tokio::sync::Mutex::new(seen),
            proceed: Notify::new(),
        })
    }

    /// From now on puts wait for [`proceed`](GatedStore::proceed) after
    /// they landed, and deletes are refused if asked.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// The path of the next upload that landed.
    pub async fn uploaded(&self) -> Path {
        self.seen.lock().await.recv().await.expect("the store is alive")
    }

    /// Lets one held-back put return.
    pub fn proceed(&self) {
        self.proceed.notify_one();
    }
}

impl std::fmt::Display for GatedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GatedStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for GatedStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await?;
        if self.armed.load(Ordering::SeqCst) {
            let _ = self.uploaded.send(location.clone());
            self.proceed.notified().await;
        }
        Ok(put)
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        if self.refuse_deletes && self.armed.load(Ordering::SeqCst) {
            return locations
                .map(|location| {
                    Err(Error::Generic {
                        store: "GatedStore",
                        source: format!("deletes are refused here ({:?})", location.ok()).into(),
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
