//! Percentiles of one scenario's latencies, computed from every sample kept
//! (a run holds at most a few hundred thousand): exact, and no histogram
//! crate to trust.

use std::time::Duration;

/// Latency percentiles of one scenario, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `samples` (sorted here); zero when empty.
    pub fn of(samples: &mut [Duration]) -> Percentiles {
        samples.sort_unstable();
        Percentiles {
            p50_ms: nearest_rank(samples, 50),
            p95_ms: nearest_rank(samples, 95),
            p99_ms: nearest_rank(samples, 99),
        }
    }
}

/// The smallest sample at or above `percent` of all samples (nearest rank),
/// so a reported p99 is a latency some operation really had.
fn nearest_rank(sorted: &[Duration], percent: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1].as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|v| Duration::from_millis(*v)).collect()
    }

    #[test]
    fn percentiles_are_samples_taken_by_nearest_rank() {
        let mut samples = ms(&(1..=100).rev().collect::<Vec<_>>());
        let p = Percentiles::of(&mut samples);
        assert_eq!((p.p50_ms, p.p95_ms, p.p99_ms), (50.0, 95.0, 99.0));
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let p = Percentiles::of(&mut ms(&[7]));
        assert_eq!((p.p50_ms, p.p95_ms, p.p99_ms), (7.0, 7.0, 7.0));
    }

    #[test]
    fn no_samples_give_zeros_rather_than_a_panic() {
        assert_eq!(Percentiles::of(&mut []).p99_ms, 0.0);
    }
}
