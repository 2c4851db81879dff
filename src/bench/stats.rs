//! Latencies of one scenario, kept in a histogram of fixed size, so a run of
//! 10⁵ operations holds no more memory than one of 10⁴ and the client's own
//! memory is what a reading of the process shows. Percentiles are within
//! 0.1% of the sample they stand for (three significant digits).

use std::time::Duration;

use hdrhistogram::Histogram;

/// The longest latency recorded as itself; longer ones count as this.
const LONGEST_US: u64 = 3_600_000_000;

/// Every latency of one scenario, in microseconds.
#[derive(Clone, Debug)]
pub(crate) struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        // Bounds and precision are constants the crate accepts.
        Latencies(Histogram::new_with_bounds(1, LONGEST_US, 3).expect("valid histogram bounds"))
    }
}

impl Latencies {
    /// Records one operation's latency.
    pub(crate) fn record(&mut self, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, LONGEST_US);
        self.0.saturating_record(us);
    }

    /// Adds another worker's latencies.
    pub(crate) fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    /// Operations recorded.
    pub(crate) fn len(&self) -> u64 {
        self.0.len()
    }

    /// The latency at `percent` of all operations, in milliseconds; zero when
    /// nothing was recorded.
    fn percentile_ms(&self, percent: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.value_at_percentile(percent) as f64 / 1000.0
    }

    /// The longest latency, in milliseconds (as its bucket stands for it,
    /// within 0.1%); zero when nothing was recorded.
    fn max_ms(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.max() as f64 / 1000.0
    }
}

/// Latency percentiles of one scenario, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Percentiles {
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// The longest.
    pub max_ms: f64,
}

impl Percentiles {
    /// The percentiles of `latencies`; zero when empty.
    pub(crate) fn of(latencies: &Latencies) -> Percentiles {
        Percentiles {
            p50_ms: latencies.percentile_ms(50.0),
            p95_ms: latencies.percentile_ms(95.0),
            p99_ms: latencies.percentile_ms(99.0),
            max_ms: latencies.max_ms(),
        }
    }
}

/// `value` rounded to `places` decimals, so the JSON shows what a person reads.
pub(crate) fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of_ms(values: impl IntoIterator<Item = u64>) -> Percentiles {
        let mut latencies = Latencies::default();
        for v in values {
            latencies.record(Duration::from_millis(v));
        }
        Percentiles::of(&latencies)
    }

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= expected * 0.001
    }

    #[test]
    fn percentiles_stand_for_recorded_samples_within_a_thousandth() {
        let p = of_ms((1..=100).rev());
        assert!(
            close(p.p50_ms, 50.0) && close(p.p95_ms, 95.0) && close(p.p99_ms, 99.0),
            "{p:?}"
        );
    }

    #[test]
    fn the_longest_is_reported_beside_the_percentiles() {
        let p = of_ms((1..=1000).chain([9000]));
        assert!(close(p.p99_ms, 991.0) && close(p.max_ms, 9000.0), "{p:?}");
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let p = of_ms([7]);
        assert!(close(p.p50_ms, 7.0) && close(p.p99_ms, 7.0), "{p:?}");
    }

    #[test]
    fn no_samples_give_zeros_rather_than_a_panic() {
        assert_eq!(of_ms([]).p99_ms, 0.0);
        assert_eq!(of_ms([]).max_ms, 0.0);
    }

    #[test]
    fn merged_workers_count_every_operation() {
        let (mut a, mut b) = (Latencies::default(), Latencies::default());
        a.record(Duration::from_millis(1));
        b.record(Duration::from_millis(3));
        b.record(Duration::from_millis(3));
        a.merge(&b);
        assert_eq!(a.len(), 3);
        assert!(close(Percentiles::of(&a).p50_ms, 3.0));
    }

    #[test]
    fn memory_does_not_grow_with_operations() {
        let mut latencies = Latencies::default();
        let before = latencies.0.distinct_values();
        for i in 0..100_000u64 {
            latencies.record(Duration::from_micros(100 + i % 5000));
        }
        assert_eq!(latencies.0.distinct_values(), before);
    }
}
