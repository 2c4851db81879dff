//! The create-only upload of an artefact, and what its failures mean.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{PutMode, PutOptions, PutPayload, PutResult};

use super::error::ArtifactError;
use super::store::ArtifactStore;

impl ArtifactStore {
    /// Puts `bytes` at `path`, never over an object already there: the name
    /// is one publish's alone, and a store that let a second write through
    /// was refused by the probe.
    pub(crate) async fn upload(&self, path: &Path, bytes: Bytes) -> Result<PutResult, ArtifactError> {
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        self.store
            .put_opts(path, PutPayload::from_bytes(bytes), options)
            .await
            .map_err(|source| match source {
                // Not a name collision, which the naming rules out: object_store
                // retries a PUT answered 5xx, 429 or 408, and a retry of one that
                // had landed is answered "exists" (Azure says it as a failed
                // precondition). The object may be there, unpublished.
                object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
                    ArtifactError::PossibleOrphan {
                        location: path.to_string(),
                        source,
                    }
                }
                source => ArtifactError::Store {
                    action: "upload",
                    path: path.to_string(),
                    source,
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use futures_util::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt,
        PutMultipartOptions, Result,
    };

    use super::*;

    /// What a store client answers for a create-only PUT it sent twice, the
    /// first attempt landing and its answer lost: the write is done, and the
    /// retry is refused as `refusal` says.
    #[derive(Debug)]
    struct RetriedPut {
        inner: InMemory,
        refusal: fn(String) -> object_store::Error,
    }

    impl std::fmt::Display for RetriedPut {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("RetriedPut")
        }
    }

    #[async_trait]
    impl ObjectStore for RetriedPut {
        async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
            self.inner.put_opts(location, payload, opts).await?;
            Err((self.refusal)(location.to_string()))
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }

        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            self.inner.get_opts(location, options).await
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

    fn already_exists(path: String) -> object_store::Error {
        object_store::Error::AlreadyExists {
            path,
            source: "409 Conflict".into(),
        }
    }

    fn precondition(path: String) -> object_store::Error {
        object_store::Error::Precondition {
            path,
            source: "412 Precondition Failed".into(),
        }
    }

    #[tokio::test]
    async fn an_upload_answered_exists_names_its_object_as_a_possible_orphan() {
        for refusal in [already_exists, precondition] {
            let store = ArtifactStore {
                store: Arc::new(RetriedPut {
                    inner: InMemory::new(),
                    refusal,
                }),
                prefix: Path::from("p"),
            };
            let path = Path::from("p/k/1/op");
            let answer = store.upload(&path, Bytes::from_static(b"landed")).await;
            let Err(ArtifactError::PossibleOrphan { location, .. }) = &answer else {
                panic!("{answer:?}")
            };
            assert_eq!(location, "p/k/1/op");
            // It is there indeed, unpublished: what the sweep will judge.
            assert!(store.store.head(&path).await.is_ok());
            let error = answer.unwrap_err().to_string();
            assert!(error.contains("p/k/1/op") && error.contains("sweep"), "{error}");
        }
    }
}
