//! Where each new connection gets its Microsoft Entra ID access token: a
//! token lasts about an hour, and the pool opens connections for as long as
//! the service runs, so a token fixed at start-up stops working.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The cause a provider gives for failing.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

type Fetch = dyn Fn() -> Pin<Box<dyn Future<Output = Result<String, BoxError>> + Send>> + Send + Sync;

/// A user's token source, called once per new connection.
#[derive(Clone)]
pub(crate) struct TokenProvider(Arc<Fetch>);

impl TokenProvider {
    pub(crate) fn new<F, Fut, E>(provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        Self(Arc::new(move || {
            let token = provider();
            Box::pin(async move { token.await.map_err(Into::into) })
        }))
    }

    /// A fresh token, or the provider's error. Bounded by `within` (the
    /// connection string's `Connect Timeout`): a provider that never answers
    /// would otherwise hold one of the pool's connection slots for ever.
    pub(crate) async fn token(&self, within: Duration) -> Result<String, BoxError> {
        match tokio::time::timeout(within, (self.0)()).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("it gave no token within {} s", within.as_secs()).into()),
        }
    }
}

impl std::fmt::Debug for TokenProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenProvider")
    }
}
