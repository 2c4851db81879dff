//! Each procedure call is one span shaped as OpenTelemetry's database client
//! conventions for SQL Server, with fencepost's own fields and never an owner
//! id or a payload; a refusal is an outcome on the span, not an error.

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost::client::{Acquire, BeginFenced, Publish, RefusalReason};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use uuid::Uuid;

/// A span as a subscriber saw it: its name, and every field recorded on it.
#[derive(Clone, Debug, Default)]
struct Seen {
    name: String,
    parent: Option<String>,
    fields: BTreeMap<String, String>,
}

/// An event's level, target and fields.
type Logged = (Level, String, BTreeMap<String, String>);

/// Keeps every span (by id, with its fields as recorded) and every event's
/// level, target and fields.
#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Seen>>>,
    events: Arc<Mutex<Vec<Logged>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

/// Where a span's record is kept, in the span's own extensions.
struct Index(usize);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut seen = Seen {
            name: attrs.metadata().name().to_string(),
            ..Seen::default()
        };
        attrs.record(&mut Fields(&mut seen.fields));
        let span = ctx.span(id).unwrap();
        seen.parent = span.parent().map(|p| p.name().to_string());
        let mut spans = self.spans.lock().unwrap();
        spans.push(seen);
        span.extensions_mut().insert(Index(spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let extensions = span.extensions();
        let index = extensions.get::<Index>().unwrap().0;
        values.record(&mut Fields(&mut self.spans.lock().unwrap()[index].fields));
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let metadata = event.metadata();
        self.events
            .lock()
            .unwrap()
            .push((*metadata.level(), metadata.target().to_string(), fields));
    }
}

fn recording() -> (Recorder, impl Subscriber + Send + Sync) {
    let recorder = Recorder::default();
    (recorder.clone(), tracing_subscriber::registry().with(recorder))
}

fn calls(recorder: &Recorder) -> Vec<Seen> {
    recorder
        .spans
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.name == "EXECUTE")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn each_call_is_a_conventional_database_span_and_a_refusal_is_an_outcome() {
    const TEST: &str = "each_call_is_a_conventional_database_span_and_a_refusal_is_an_outcome";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let target = ConnectionString::parse(&db.ado()).unwrap();
    let client = Client::connect_with(ClientConfig::new(target.clone())).await.unwrap();
    let key = format!("spans:{}", Uuid::new_v4().simple());
    let (recorder, subscriber) = recording();
    let _default = tracing::subscriber::set_default(subscriber);

    client.provision(&key).await.unwrap();
    let Acquire::Acquired(first) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    let published = Uuid::new_v4();
    assert_eq!(
        client
            .publish_and_release(&first, published, "secret payload")
            .await
            .unwrap(),
        Publish::Published
    );
    let Acquire::Acquired(second) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    // The first holder, superseded: a refusal, as an outcome.
    assert_eq!(
        client.publish(&first, Uuid::new_v4(), "late").await.unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );
    let begun = client.begin_fenced_without_guard(&first).await.unwrap();
    assert!(
        matches!(begun, BeginFenced::Refused(RefusalReason::Superseded)),
        "{begun:?}"
    );
    drop(begun);
    assert_eq!(
        client.release(&second).await.unwrap(),
        fencepost::client::Release::Released
    );

    let spans = calls(&recorder);
    let names: Vec<&str> = spans.iter().map(|s| s.fields["otel.name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "EXECUTE fence_api.Provision",
            "EXECUTE fence_api.Acquire",
            "EXECUTE fence_api.Publish",
            "EXECUTE fence_api.Acquire",
            "EXECUTE fence_api.Publish",
            "EXECUTE fence_api.AssertHolder",
            "EXECUTE fence_api.Release",
        ]
    );
    let server = target.server();
    let (address, port) = server.rsplit_once(':').unwrap();
    for span in &spans {
        let f = &span.fields;
        let procedure = f["otel.name"].trim_start_matches("EXECUTE ");
        assert_eq!(f["otel.kind"], "client");
        assert_eq!(f["db.system.name"], "microsoft.sql_server");
        assert_eq!(f["db.operation.name"], "EXECUTE");
        assert_eq!(f["db.stored_procedure.name"], procedure);
        assert_eq!(f["db.namespace"], db.name);
        assert_eq!(f["server.address"], address);
        assert_eq!(f["server.port"], port);
        assert_eq!(f["fencepost.resource_key"], key);
        // Refusals are outcomes: no span of this run is an error.
        assert!(
            !f.contains_key("otel.status_code") && !f.contains_key("error.type"),
            "{f:?}"
        );
        // Never an owner id or a payload.
        for value in f.values() {
            for secret in [first.owner().to_string(), second.owner().to_string()] {
                assert!(!value.to_lowercase().contains(&secret), "an owner id in {f:?}");
            }
            assert!(!value.contains("secret payload"), "a payload in {f:?}");
        }
    }
    let outcomes: Vec<&str> = spans.iter().map(|s| s.fields["fencepost.outcome"].as_str()).collect();
    assert_eq!(
        outcomes,
        [
            "Created",
            "Acquired",
            "Published",
            "Acquired",
            "Superseded",
            "Superseded",
            "Released"
        ]
    );
    assert_eq!(spans[2].fields["fencepost.operation_id"], published.to_string());
    assert_eq!(spans[2].fields["fencepost.generation"], first.generation().to_string());
    assert_eq!(spans[6].fields["fencepost.generation"], second.generation().to_string());

    // fencepost itself logs no refusal as an error (tiberius logs every
    // server error token at ERROR under its own target: see the README).
    let errors: Vec<_> = recorder
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|(level, target, _)| *level == Level::ERROR && target.starts_with("fencepost"))
        .cloned()
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    drop(client);
    db.drop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_call_is_an_error_span_with_its_number_or_kind() {
    const TEST: &str = "a_failed_call_is_an_error_span_with_its_number_or_kind";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    // The deploy login may not be used by a client without saying so; a
    // login with no fence role is refused by the server instead.
    let mut db = db;
    let nobody = db.login_in_role(None).await;
    let client = Client::connect_with(ClientConfig::new(ConnectionString::parse(&nobody).unwrap()))
        .await
        .unwrap();
    let (recorder, subscriber) = recording();
    let _default = tracing::subscriber::set_default(subscriber);
    let error = client.inspect("spans:refused").await.unwrap_err();
    let number = error.server_number().expect("a server refusal");
    let spans = calls(&recorder);
    assert_eq!(spans.len(), 1, "{spans:?}");
    let f = &spans[0].fields;
    assert_eq!(f["otel.status_code"], "ERROR");
    assert_eq!(f["db.response.status_code"], number.to_string());
    assert_eq!(f["error.type"], number.to_string());
    assert!(!f.contains_key("fencepost.outcome"), "{f:?}");
    drop(client);
    db.drop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn run_fenced_and_a_fenced_transaction_are_the_parents_of_their_calls() {
    const TEST: &str = "run_fenced_and_a_fenced_transaction_are_the_parents_of_their_calls";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = Client::connect_with(ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap()))
        .await
        .unwrap();
    let key = format!("spans:{}", Uuid::new_v4().simple());
    client.provision(&key).await.unwrap();
    let (recorder, subscriber) = recording();
    let _default = tracing::subscriber::set_default(subscriber);

    let ran = client
        .run_fenced(&key, Duration::from_secs(60), |_| async {
            Ok::<_, std::convert::Infallible>("done")
        })
        .await
        .unwrap();
    assert!(matches!(ran, fencepost::client::Fenced::Published { .. }), "{ran:?}");
    let Acquire::Acquired(lease) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    let committed = client
        .fenced_transaction_without_guard(&lease, async |_tx| Ok::<_, std::convert::Infallible>(()))
        .await
        .unwrap();
    assert!(matches!(committed, fencepost::client::FencedOutcome::Committed(())));

    let spans = recorder.spans.lock().unwrap().clone();
    let run = spans
        .iter()
        .find(|s| s.name == "fencepost.run_fenced")
        .expect("a run_fenced span");
    assert_eq!(run.fields["fencepost.outcome"], "Published");
    assert_eq!(run.fields["fencepost.resource_key"], key);
    let under = |parent: &str| -> Vec<String> {
        spans
            .iter()
            .filter(|s| s.name == "EXECUTE" && s.parent.as_deref() == Some(parent))
            .map(|s| s.fields["otel.name"].clone())
            .collect()
    };
    assert_eq!(
        under("fencepost.run_fenced"),
        ["EXECUTE fence_api.Acquire", "EXECUTE fence_api.Publish"]
    );
    assert_eq!(
        under("fencepost.fenced_transaction"),
        ["EXECUTE fence_api.AssertHolder"]
    );
    let tx = spans.iter().find(|s| s.name == "fencepost.fenced_transaction").unwrap();
    assert_eq!(tx.fields["fencepost.outcome"], "Committed");
    drop(client);
    db.drop().await;
}
