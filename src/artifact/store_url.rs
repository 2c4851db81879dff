//! A store named by its URL: opening it with credentials from the
//! environment as object_store reads them, the folder inside it artefacts go
//! under, and the URL and the store as they may be printed, without secrets.

use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreScheme};

use super::error::ArtifactError;

/// The store `url` names and the path inside it the URL points at:
/// `file:///var/reports`, `memory://`, `s3://bucket/path`,
/// `az://container/path` (or `azure://`, `abfs://`, an `https://` Azure
/// URL), `gs://bucket/path`. Credentials and settings come from the
/// environment as each builder's `from_env` reads them (`AWS_*`, `AZURE_*`,
/// `GOOGLE_*`; `AZURE_STORAGE_USE_EMULATOR=true` for Azurite).
///
/// A folder (`file://`) is written with fsync on: an upload returns only
/// once the file and its directory entry are on disk, so a pointer the
/// fence commits never names bytes a crash can still take away.
pub fn open_url(url: &str) -> Result<(Arc<dyn ObjectStore>, Path), ArtifactError> {
    let parsed = url::Url::parse(url).map_err(|e| unusable(url, None, &e))?;
    let bad = |e: &dyn std::fmt::Display| unusable(url, Some(&parsed), e);
    let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| bad(&e))?;
    let path = Path::parse(path).map_err(|e| bad(&e))?;
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::Local => Arc::new(LocalFileSystem::new().with_fsync(true)),
        ObjectStoreScheme::Memory => Arc::new(InMemory::new()),
        ObjectStoreScheme::AmazonS3 => {
            Arc::new(AmazonS3Builder::from_env().with_url(url).build().map_err(|e| bad(&e))?)
        }
        ObjectStoreScheme::MicrosoftAzure => Arc::new(
            MicrosoftAzureBuilder::from_env()
                .with_url(url)
                .build()
                .map_err(|e| bad(&e))?,
        ),
        ObjectStoreScheme::GoogleCloudStorage => Arc::new(
            GoogleCloudStorageBuilder::from_env()
                .with_url(url)
                .build()
                .map_err(|e| bad(&e))?,
        ),
        other => return Err(bad(&format_args!("{other:?} stores are not supported for artefacts"))),
    };
    Ok((store, path))
}

/// [`ArtifactError::StoreUrl`] for `url`, with the URL redacted in the
/// error's own words too: object_store's errors quote the URL they refused,
/// as given and as parsed.
fn unusable(url: &str, parsed: Option<&url::Url>, error: &dyn std::fmt::Display) -> ArtifactError {
    let mut why = error.to_string();
    for spelling in parsed.map(url::Url::as_str).into_iter().chain([url]) {
        why = why.replace(spelling, &redact_url(spelling));
    }
    ArtifactError::StoreUrl {
        url: redact_url(url),
        source: why.into(),
    }
}

/// `url` fit to print: its user information (`user:password@`) and its
/// query and fragment (a SAS token, a signature) replaced by `***`. The
/// user name of an `abfs://` or `abfss://` URL names the container, not a
/// credential, and stays. Text that is not a URL is redacted the same way,
/// as far as it looks like one.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    // The authority runs to the first `/`; a `?` or `#` before it may belong
    // to a password, so the user information is cut at its last `@` first.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let mut redacted = String::from(scheme);
    let host = match authority.rfind('@') {
        Some(at) => {
            let user = &authority[..at];
            let container = user.split(':').next().unwrap_or_default();
            let names_container = matches!(scheme, "abfs://" | "abfss://") && !container.contains(['?', '#']);
            match (names_container, user.contains(':')) {
                (true, false) => redacted.push_str(user),
                (true, true) => redacted.push_str(&format!("{container}:***")),
                (false, _) => redacted.push_str("***"),
            }
            redacted.push('@');
            &authority[at + 1..]
        }
        None => authority,
    };
    let tail = format!("{host}{path}");
    match tail.find(['?', '#']) {
        Some(at) => {
            redacted.push_str(&tail[..=at]);
            redacted.push_str("***");
        }
        None => redacted.push_str(&tail),
    }
    redacted
}

/// `base` (a store URL's path) and then `prefix`'s segments, the path the
/// artefacts of that prefix are under; `prefix` may be empty.
pub fn join_prefix(base: &Path, prefix: &str) -> Result<Path, ArtifactError> {
    let refused = || ArtifactError::Prefix {
        prefix: prefix.to_string(),
    };
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(base.clone());
    }
    if trimmed.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err(refused());
    }
    let parsed = Path::parse(trimmed).map_err(|_| refused())?;
    Ok(base.parts().chain(parsed.parts()).collect())
}

/// The `Debug` of a handle on `store` under `prefix`: the store's `Display`
/// (its kind and bucket or container or root) and the prefix, nothing of
/// its configuration.
pub(crate) fn debug_store(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    store: &dyn ObjectStore,
    prefix: &Path,
) -> std::fmt::Result {
    f.debug_struct(name)
        .field("store", &format_args!("{store}"))
        .field("prefix", &prefix.as_ref())
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_joined_under_the_url_path() {
        let base = Path::from("bucket-path");
        assert_eq!(join_prefix(&base, "a/b").unwrap().as_ref(), "bucket-path/a/b");
        assert_eq!(join_prefix(&base, "/a/b/").unwrap().as_ref(), "bucket-path/a/b");
        assert_eq!(join_prefix(&base, "").unwrap().as_ref(), "bucket-path");
        for bad in ["a//b", "a/../b", "./a"] {
            assert!(
                matches!(join_prefix(&base, bad), Err(ArtifactError::Prefix { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn store_urls_of_each_kind_open_and_others_are_refused() {
        let (_, path) = open_url("file:///tmp/reports").unwrap();
        assert_eq!(path.as_ref(), "tmp/reports");
        assert!(open_url("memory://").is_ok());
        for bad in ["not a url", "ftp://host/x", "/tmp/reports"] {
            assert!(matches!(open_url(bad), Err(ArtifactError::StoreUrl { .. })), "{bad}");
        }
    }

    #[test]
    fn a_folder_opened_by_url_is_written_with_fsync() {
        let (store, _) = open_url("file:///srv/reports").unwrap();
        let debug = format!("{store:?}");
        assert!(debug.contains("fsync: true"), "{debug}");
    }

    #[test]
    fn a_url_is_printed_without_its_user_information_query_or_fragment() {
        for (url, printed) in [
            (
                "https://acct.blob.core.windows.net/c/p?sv=2022-11-02&sig=abc%2Bdef",
                "https://acct.blob.core.windows.net/c/p?***",
            ),
            ("s3://AKIAEXAMPLE:wJalrXUtn@bucket/path", "s3://***@bucket/path"),
            ("https://token@host/x#frag", "https://***@host/x#***"),
            // A `?` in a password does not end the user information here.
            ("https://user:pa?ss@host/x", "https://***@host/x"),
            (
                "abfss://reports@acct.dfs.core.windows.net/p",
                "abfss://reports@acct.dfs.core.windows.net/p",
            ),
            (
                "abfss://reports:key@acct.dfs.core.windows.net/p",
                "abfss://reports:***@acct.dfs.core.windows.net/p",
            ),
            ("az://container/path/a@b", "az://container/path/a@b"),
            ("file:///var/reports", "file:///var/reports"),
            ("memory://", "memory://"),
            ("not a url?secret", "not a url?***"),
            ("user:pw@host/x", "***@host/x"),
        ] {
            assert_eq!(redact_url(url), printed, "{url}");
        }
    }

    #[test]
    fn a_store_url_error_never_repeats_the_url_s_secrets() {
        for url in [
            "ftp://user:hunter2@host/x?sig=s3cr3t",
            "s3://user:hunter2@?sig=s3cr3t",
            "https://user:hunter2@example.com/x?sig=s3cr3t",
        ] {
            let error = open_url(url).unwrap_err();
            assert!(matches!(error, ArtifactError::StoreUrl { .. }), "{url}: {error:?}");
            let mut said = format!("{error} {error:?}");
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                said.push_str(&format!(" {cause} {cause:?}"));
                source = cause.source();
            }
            for secret in ["hunter2", "s3cr3t"] {
                assert!(!said.contains(secret), "{url}: {said}");
            }
        }
    }
}
