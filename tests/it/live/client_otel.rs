//! What an OpenTelemetry backend receives from the client when a service's
//! subscriber is `tracing-opentelemetry` over an SDK tracer provider and
//! nothing else: the spans as an exporter is handed them, not the `tracing`
//! fields (tests/client_spans.rs checks those). Each call is a CLIENT span
//! named `EXECUTE <procedure>` with the database conventions' attributes, a
//! call under `run_fenced` or a fenced transaction is a child in its trace, a
//! refusal is no error status and a server error is one, with its number;
//! for a refusal AssertHolder raises, that takes the documented filter.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use fencepost::client::{
    Acquire, BeginFenced, Error, Fenced, FencedOutcome, FencedSet, Publish, RefusalReason, Release,
};
use fencepost::{Client, ClientConfig, ConnectionString};
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use support::TestDatabase;
use support::lease::provisioned;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use uuid::Uuid;

/// The filter docs/client.md gives a service: the driver's log of each
/// error token the server sends is off (every one is also returned).
const DOCUMENTED_FILTER: &str = "info,tiberius::tds::stream::token=off";

/// A tracer provider whose exporter keeps what it was handed, each span as
/// it ends (a simple, not a batching, processor).
struct Backend {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
}

impl Backend {
    /// The subscriber docs/client.md shows a service, with the in-memory
    /// exporter in place of OTLP, as this thread's default: the
    /// `tracing-opentelemetry` layer and the documented filter, no more.
    fn installed() -> (Backend, DefaultGuard) {
        Backend::installed_with(DOCUMENTED_FILTER)
    }

    fn installed_with(filter: &str) -> (Backend, DefaultGuard) {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("client_otel")))
            .with(EnvFilter::new(filter));
        let guard = tracing::subscriber::set_default(subscriber);
        (Backend { exporter, provider }, guard)
    }

    /// Every span exported so far, in the order they ended.
    fn spans(&self) -> Vec<SpanData> {
        self.provider.force_flush().expect("flushing the tracer provider");
        self.exporter.get_finished_spans().expect("the exported spans")
    }

    /// The exported spans of procedure calls, in the order they ended.
    fn calls(&self) -> Vec<SpanData> {
        self.spans()
            .into_iter()
            .filter(|s| s.name.starts_with("EXECUTE "))
            .collect()
    }
}

/// A span's attributes by key (each key is set once by the client).
fn attributes(span: &SpanData) -> BTreeMap<String, Value> {
    span.attributes
        .iter()
        .map(|kv| (kv.key.as_str().to_string(), kv.value.clone()))
        .collect()
}

fn text(value: &str) -> Value {
    Value::from(value.to_string())
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        panic!(
            "no span {name} in {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

#[tokio::test(flavor = "current_thread")]
async fn each_call_reaches_the_backend_as_a_conventional_client_span_and_a_refusal_is_no_error() {
    const TEST: &str = "each_call_reaches_the_backend_as_a_conventional_client_span_and_a_refusal_is_no_error";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let target = ConnectionString::parse(&db.ado()).unwrap();
    let client = Client::connect_with(ClientConfig::new(target.clone())).await.unwrap();
    let key = format!("otel:{}", Uuid::new_v4().simple());
    let (backend, _default) = Backend::installed();

    client.provision(&key).await.unwrap();
    let Acquire::Acquired(first) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    assert_eq!(
        client
            .publish_and_release(&first, Uuid::new_v4(), "secret payload")
            .await
            .unwrap(),
        Publish::Published
    );
    let Acquire::Acquired(second) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    // Two refusals of the superseded holder: an outcome the procedure
    // returns, and one AssertHolder raises with THROW.
    assert_eq!(
        client.publish(&first, Uuid::new_v4(), "late payload").await.unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );
    let begun = client.begin_fenced_without_guard(&first).await.unwrap();
    assert!(
        matches!(begun, BeginFenced::Refused(RefusalReason::Superseded)),
        "{begun:?}"
    );
    drop(begun);
    assert_eq!(client.release(&second).await.unwrap(), Release::Released);

    let spans = backend.calls();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
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
    let port: i64 = port.parse().unwrap();
    let secrets = [
        first.owner().to_string(),
        second.owner().to_string(),
        "secret payload".to_string(),
        "late payload".to_string(),
    ];
    for span in &spans {
        let a = attributes(span);
        let procedure = span.name.trim_start_matches("EXECUTE ");
        assert_eq!(span.span_kind, SpanKind::Client, "{span:?}");
        assert_eq!(span.status, Status::Unset, "a refusal or success is no error: {span:?}");
        assert_eq!(a["db.system.name"], text("microsoft.sql_server"));
        assert_eq!(a["db.operation.name"], text("EXECUTE"));
        assert_eq!(a["db.stored_procedure.name"], text(procedure));
        assert_eq!(a["db.namespace"], text(&db.name));
        assert_eq!(a["server.address"], text(address));
        assert_eq!(
            a["server.port"],
            Value::I64(port),
            "an integer, as the conventions type it"
        );
        assert_eq!(a["fencepost.resource_key"], text(&key));
        assert!(
            !a.contains_key("error.type") && !a.contains_key("db.response.status_code"),
            "{a:?}"
        );
        // The layer's directives are read, not passed on as attributes.
        let helpers: Vec<&String> = a.keys().filter(|k| k.starts_with("otel.")).collect();
        assert!(helpers.is_empty(), "{helpers:?} exported as attributes");
        for value in a.values() {
            let value = value.to_string().to_lowercase();
            for secret in &secrets {
                assert!(!value.contains(secret), "{secret:?} exported in {a:?}");
            }
        }
    }
    let outcomes: Vec<Value> = spans
        .iter()
        .map(|s| attributes(s)["fencepost.outcome"].clone())
        .collect();
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
        .map(text)
    );
    assert_eq!(
        attributes(&spans[2])["fencepost.generation"],
        Value::I64(first.generation())
    );
    drop(client);
    db.drop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn calls_under_run_fenced_or_a_fenced_transaction_are_its_children_in_one_trace() {
    const TEST: &str = "calls_under_run_fenced_or_a_fenced_transaction_are_its_children_in_one_trace";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    let key = provisioned(&client, "otel").await;
    let (backend, _default) = Backend::installed();

    let ran = client
        .run_fenced(&key, Duration::from_secs(60), |_| async {
            Ok::<_, std::convert::Infallible>("done")
        })
        .await
        .unwrap();
    assert!(matches!(ran, Fenced::Published { .. }), "{ran:?}");
    let Acquire::Acquired(lease) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    let committed = client
        .fenced_transaction_without_guard(&lease, async |_tx| Ok::<_, std::convert::Infallible>(()))
        .await
        .unwrap();
    assert!(matches!(committed, FencedOutcome::Committed(())));

    let spans = backend.spans();
    let children = |parent: &SpanData| -> Vec<&str> {
        let context = &parent.span_context;
        spans
            .iter()
            .filter(|s| s.parent_span_id == context.span_id() && s.span_context.trace_id() == context.trace_id())
            .map(|s| s.name.as_ref())
            .collect()
    };
    let run = named(&spans, "fencepost.run_fenced");
    assert_eq!(run.span_kind, SpanKind::Internal);
    assert_eq!(attributes(run)["fencepost.outcome"], text("Published"));
    assert_eq!(attributes(run)["fencepost.resource_key"], text(&key));
    // The guard's renewals end before the publish: they are stopped first.
    assert_eq!(
        children(run),
        [
            "EXECUTE fence_api.Acquire",
            "fencepost.renewals",
            "EXECUTE fence_api.Publish"
        ]
    );
    let tx = named(&spans, "fencepost.fenced_transaction");
    assert_eq!(attributes(tx)["fencepost.outcome"], text("Committed"));
    assert_eq!(children(tx), ["EXECUTE fence_api.AssertHolder"]);
    // Two operations of the service, two traces.
    assert_ne!(run.span_context.trace_id(), tx.span_context.trace_id());
    drop(client);
    db.drop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn calls_under_run_fenced_set_are_its_children_and_it_names_the_keys() {
    const TEST: &str = "calls_under_run_fenced_set_are_its_children_and_it_names_the_keys";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    let keys = [
        provisioned(&client, "otel-set").await,
        provisioned(&client, "otel-set").await,
    ];
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let (backend, _default) = Backend::installed();

    let ran = client
        .run_fenced_set(&refs, Duration::from_secs(60), |_| async {
            Ok::<_, std::convert::Infallible>(keys.iter().map(|key| (key.clone(), "done".to_string())).collect())
        })
        .await
        .unwrap();
    assert!(matches!(ran, FencedSet::Published { .. }), "{ran:?}");

    let spans = backend.spans();
    let run = named(&spans, "fencepost.run_fenced_set");
    assert_eq!(run.span_kind, SpanKind::Internal);
    assert_eq!(attributes(run)["fencepost.outcome"], text("Published"));
    assert_eq!(attributes(run)["fencepost.key_count"], Value::I64(2));
    assert_eq!(attributes(run)["fencepost.resource_keys"], text(&refs.join(", ")));
    let context = &run.span_context;
    let children: Vec<&str> = spans
        .iter()
        .filter(|s| s.parent_span_id == context.span_id() && s.span_context.trace_id() == context.trace_id())
        .map(|s| s.name.as_ref())
        .collect();
    assert_eq!(
        children,
        [
            "EXECUTE fence_api.AcquireSet",
            "fencepost.renewals",
            "EXECUTE fence_api.PublishSet"
        ]
    );
    drop(client);
    db.drop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_error_is_an_error_span_with_its_number() {
    const TEST: &str = "a_server_error_is_an_error_span_with_its_number";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    let key = provisioned(&client, "otel").await;
    let operation = Uuid::new_v4();
    let Acquire::Acquired(first) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    assert_eq!(
        client.publish_and_release(&first, operation, "one").await.unwrap(),
        Publish::Published
    );
    let Acquire::Acquired(second) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    let (backend, _default) = Backend::installed();

    // An operation id used in another generation: only the server can tell,
    // and it raises 50107 (an input error, not a refusal).
    let error = client
        .publish(&second, operation, "rejected payload")
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Rejected { number: 50107, .. }), "{error:?}");

    let spans = backend.calls();
    assert_eq!(spans.len(), 1, "{spans:?}");
    let span = &spans[0];
    let a = attributes(span);
    assert_eq!(span.name, "EXECUTE fence_api.Publish");
    assert_eq!(span.span_kind, SpanKind::Client);
    assert!(matches!(span.status, Status::Error { .. }), "{:?}", span.status);
    assert_eq!(a["error.type"], text("50107"));
    assert_eq!(a["db.response.status_code"], text("50107"));
    assert!(!a.contains_key("fencepost.outcome"), "{a:?}");
    assert!(
        a.values().all(|v| !v.to_string().contains("rejected payload")),
        "a payload exported in {a:?}"
    );
    drop(client);
    db.drop().await;
}

/// tracing-opentelemetry marks a span Error when an ERROR event is logged in
/// it, and the driver logs AssertHolder's THROW of a refusal at ERROR inside
/// the call's span: the documented filter keeps that event out, so the span
/// says what the call answered. Should this fail because a refusal no longer
/// reads as an error without the filter, docs/client.md can drop its reason.
#[tokio::test(flavor = "current_thread")]
async fn the_documented_filter_is_what_keeps_a_thrown_refusal_from_reading_as_an_error() {
    const TEST: &str = "the_documented_filter_is_what_keeps_a_thrown_refusal_from_reading_as_an_error";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    let key = provisioned(&client, "otel").await;
    let Acquire::Acquired(first) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };
    assert_eq!(client.release(&first).await.unwrap(), Release::Released);
    let Acquire::Acquired(second) = client.acquire(&key, Duration::from_secs(60)).await.unwrap() else {
        panic!("not acquired")
    };

    let mut statuses = Vec::new();
    for filter in [DOCUMENTED_FILTER, "info"] {
        let (backend, default) = Backend::installed_with(filter);
        let begun = client.begin_fenced_without_guard(&first).await.unwrap();
        assert!(
            matches!(begun, BeginFenced::Refused(RefusalReason::Superseded)),
            "{begun:?}"
        );
        drop(begun);
        drop(default);
        let spans = backend.calls();
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!(spans[0].name, "EXECUTE fence_api.AssertHolder");
        assert_eq!(attributes(&spans[0])["fencepost.outcome"], text("Superseded"));
        statuses.push(spans[0].status.clone());
    }
    assert_eq!(statuses, [Status::Unset, Status::error("")]);
    assert_eq!(client.release(&second).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}
