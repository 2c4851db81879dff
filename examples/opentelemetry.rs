//! A service's lease calls as OpenTelemetry spans, with nothing between
//! fencepost and OpenTelemetry but the subscriber: a `tracing_subscriber`
//! registry with a `tracing_opentelemetry` layer over an SDK tracer
//! provider. Each procedure call arrives as a CLIENT span `EXECUTE
//! fence_api.<Procedure>` with the database conventions' attributes, as a
//! child of `fencepost.run_fenced` when `run_fenced` made it.
//!
//! Needs a database deployed with `fencepost migrate` and a login in the
//! `fence_service` role:
//!
//! ```text
//! FENCEPOST_CONNECTION='Server=tcp:127.0.0.1,1433;Database=app;User ID=svc;Password=...;Encrypt=true;TrustServerCertificate=true' \
//!     cargo run --example opentelemetry
//! ```
//!
//! The spans go to the SDK's in-memory exporter and are printed at the end,
//! so the example needs no collector. A service sends them to one over OTLP
//! instead: with the `opentelemetry-otlp` crate, build
//! `opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?` and
//! hand it to `.with_batch_exporter(...)` in place of
//! `.with_simple_exporter(...)`; the printing goes, the rest stays as it is.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use fencepost::Client;
use fencepost::client::{Acquire, Fenced, Release};
use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

const REPORT: &str = "report:daily-revenue";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_resource(Resource::builder().with_service_name("report-service").build())
        .with_simple_exporter(exporter.clone())
        .build();
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("report-service")))
        // The driver logs each error token the server sends at ERROR, also
        // a refusal the procedures raise on purpose, and the layer would
        // mark the call's span Error for it: every one is also returned,
        // so nothing is lost (see docs/client.md, "Logs").
        .with(EnvFilter::new("info,tiberius::tds::stream::token=off"))
        .init();

    let ado =
        std::env::var("FENCEPOST_CONNECTION").map_err(|_| "set FENCEPOST_CONNECTION to an ADO connection string")?;
    let client = Client::connect(&ado).await?;
    client.provision(REPORT).await?;

    // One trace: Acquire, the guard's renewals and Publish under run_fenced.
    let ran = client
        .run_fenced(REPORT, Duration::from_secs(30), |_| async {
            Ok::<_, Infallible>("revenue: 42")
        })
        .await?;
    match ran {
        Fenced::Published { generation, .. } => println!("run_fenced: published generation {generation}"),
        other => println!("run_fenced: {other:?}"),
    }

    // Calls of their own: a second acquire is refused, an outcome on its
    // span (`fencepost.outcome = Busy`), not an error status.
    if let Acquire::Acquired(lease) = client.acquire(REPORT, Duration::from_secs(30)).await? {
        let second = client.acquire(REPORT, Duration::from_secs(30)).await?;
        println!("a second acquire: {second:?}");
        if client.release(&lease).await? == Release::Released {
            println!("released generation {}", lease.generation());
        }
    }
    drop(client);

    provider.force_flush()?;
    print_traces(&exporter.get_finished_spans()?);
    provider.shutdown()?;
    Ok(())
}

/// Each trace as a tree, as a backend would show it. Only the conventions'
/// and fencepost's attributes are printed; the layer adds `code.*`,
/// `thread.*`, `busy_ns` and `idle_ns` of its own.
fn print_traces(spans: &[SpanData]) {
    let mut children: HashMap<SpanId, Vec<&SpanData>> = HashMap::new();
    for span in spans {
        children.entry(span.parent_span_id).or_default().push(span);
    }
    for list in children.values_mut() {
        list.sort_by_key(|s| s.start_time);
    }
    for root in children.get(&SpanId::INVALID).into_iter().flatten() {
        println!("\ntrace {}", root.span_context.trace_id());
        print_tree(root, &children, 1);
    }
}

fn print_tree(span: &SpanData, children: &HashMap<SpanId, Vec<&SpanData>>, depth: usize) {
    let shown: Vec<String> = span
        .attributes
        .iter()
        .filter(|kv| {
            let key = kv.key.as_str();
            ["db.", "server.", "error.", "fencepost."]
                .iter()
                .any(|p| key.starts_with(p))
        })
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    println!(
        "{:indent$}{} [{:?}, {:?}] {}",
        "",
        span.name,
        span.span_kind,
        span.status,
        shown.join(" "),
        indent = depth * 2
    );
    for child in children.get(&span.span_context.span_id()).into_iter().flatten() {
        print_tree(child, children, depth + 1);
    }
}
