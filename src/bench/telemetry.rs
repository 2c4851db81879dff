//! Observability switched on in the bench process, so a run shows what it
//! costs a service per call: a `tracing` layer that formats every fencepost
//! span and event, fields and timings included, as a log subscriber would,
//! and a `metrics` recorder that keeps every update, as an exporter would.
//!
//! Both are global in a process (one subscriber, one recorder), so the
//! caller installs them before the run, the layer beside its own: a library
//! must not take a process's globals. `fencepost bench --telemetry` does it
//! at start-up.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::registry::LookupSpan;

/// The layer and the recorder a bench run with telemetry feeds, and what
/// they saw. Clones share one count.
///
/// ```
/// # use fencepost::bench::{BenchOptions, Telemetry};
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let telemetry = Telemetry::new();
/// let subscriber = tracing_subscriber::registry().with(telemetry.layer());
/// // tracing::subscriber::set_global_default(subscriber)?;
/// // telemetry.install_recorder()?;
/// let mut options = BenchOptions::default();
/// options.telemetry(telemetry);
/// # drop(subscriber);
/// ```
#[derive(Clone, Default)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    /// Lines the layer formatted: one per event, one per closed span.
    lines: AtomicU64,
    #[cfg(feature = "metrics")]
    metrics: metrics_util::registry::Registry<metrics::Key, metrics_util::registry::AtomicStorage>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            lines: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            metrics: metrics_util::registry::Registry::atomic(),
        }
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("recorded", &self.recorded()).finish()
    }
}

/// What the layer and the recorder saw during a run, set-up and warm-up
/// included: proof that they were installed and recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TelemetryRecorded {
    /// Lines the layer formatted (one per event and one per closed span),
    /// written to nowhere.
    pub lines_formatted: u64,
    /// Samples the recorder keeps of `db.client.operation.duration`, one per
    /// procedure call; `null` without the cargo feature `metrics`.
    pub call_durations_recorded: Option<u64>,
}

impl Telemetry {
    /// A handle that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A layer that enables every span and event of fencepost's targets at
    /// every level and formats each as `tracing_subscriber`'s `fmt` layer
    /// does (timestamp, level, the span's fields as they are recorded, and a
    /// line when a span closes with its busy and idle time), into a writer
    /// that only counts lines. Its filter is its own, so a log layer beside
    /// it keeps its level.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_span_events(FmtSpan::CLOSE)
            .with_writer(LineCounter(self.inner.clone()))
            .with_filter(Targets::new().with_target("fencepost", LevelFilter::TRACE))
    }

    /// Installs the recorder as the process's global `metrics` recorder. It
    /// keeps each counter, gauge and histogram sample under its full key,
    /// labels included, in `metrics-util`'s registry, the store the
    /// Prometheus exporter keeps them in; nothing drains it, so a run holds
    /// every duration sample (8 bytes each) until it ends.
    #[cfg(feature = "metrics")]
    pub fn install_recorder(&self) -> Result<(), RecorderInstalled> {
        metrics::set_global_recorder(Recorder(self.inner.clone())).map_err(|_| RecorderInstalled)
    }

    /// What was seen so far.
    pub fn recorded(&self) -> TelemetryRecorded {
        TelemetryRecorded {
            lines_formatted: self.inner.lines.load(Ordering::Relaxed),
            call_durations_recorded: self.inner.call_durations(),
        }
    }
}

/// The process has a global `metrics` recorder already; there can be one.
#[cfg(feature = "metrics")]
#[derive(Debug, thiserror::Error)]
#[error("a metrics recorder is installed already, so the bench's cannot be")]
pub struct RecorderInstalled;

impl Inner {
    #[cfg(feature = "metrics")]
    fn call_durations(&self) -> Option<u64> {
        let mut samples = 0;
        self.metrics.visit_histograms(|key, histogram| {
            if key.name() == crate::client::meter::OPERATION_DURATION {
                histogram.data_with(|block| samples += block.len() as u64);
            }
        });
        Some(samples)
    }

    #[cfg(not(feature = "metrics"))]
    fn call_durations(&self) -> Option<u64> {
        None
    }
}

/// The layer's writer: counts the lines it is given and keeps none.
struct LineCounter(Arc<Inner>);

impl<'a> MakeWriter<'a> for LineCounter {
    type Writer = CountedSink<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        CountedSink(&self.0.lines)
    }
}

struct CountedSink<'a>(&'a AtomicU64);

impl io::Write for CountedSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let lines = buf.iter().filter(|b| **b == b'\n').count() as u64;
        self.0.fetch_add(lines, Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The recorder: every metric in the registry, found or created under its
/// key at each update, as the exporters do.
#[cfg(feature = "metrics")]
struct Recorder(Arc<Inner>);

#[cfg(feature = "metrics")]
impl metrics::Recorder for Recorder {
    // Descriptions are sent once per process; an exporter keeps them for
    // its output, which this recorder has none of.
    fn describe_counter(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_gauge(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_histogram(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        self.0
            .metrics
            .get_or_create_counter(key, |c| metrics::Counter::from_arc(c.clone()))
    }

    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        self.0
            .metrics
            .get_or_create_gauge(key, |g| metrics::Gauge::from_arc(g.clone()))
    }

    fn register_histogram(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Histogram {
        self.0
            .metrics
            .get_or_create_histogram(key, |h| metrics::Histogram::from_arc(h.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn the_layer_formats_fencepost_spans_and_events_and_nothing_else() {
        let telemetry = Telemetry::new();
        let subscriber = tracing_subscriber::registry().with(telemetry.layer());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::trace_span!(target: "fencepost::client", "EXECUTE", db.namespace = "app");
            span.in_scope(|| tracing::debug!(target: "fencepost::client", outcome = "Busy", "refused"));
            drop(span);
            tracing::error!(target: "tiberius", "not ours");
        });
        // The event, then the span's close.
        assert_eq!(telemetry.recorded().lines_formatted, 2);
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn the_recorder_keeps_each_call_duration() {
        let telemetry = Telemetry::new();
        let recorder = Recorder(telemetry.inner.clone());
        metrics::with_local_recorder(&recorder, || {
            for seconds in [0.001, 0.002] {
                metrics::histogram!(crate::client::meter::OPERATION_DURATION, "db.stored_procedure.name" => "x")
                    .record(seconds);
            }
            metrics::histogram!("another").record(1.0);
        });
        assert_eq!(telemetry.recorded().call_durations_recorded, Some(2));
    }
}
