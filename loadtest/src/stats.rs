//! Latency summaries.

use std::time::Duration;

/// Percentiles of a set of samples.
pub struct Summary {
    pub n: usize,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub mean: Duration,
}

pub fn summarize(mut samples: Vec<Duration>) -> Summary {
    assert!(!samples.is_empty(), "no samples");
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    Summary { n: samples.len(), p50: at(0.5), p90: at(0.9), p99: at(0.99), mean }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={} p50={:.1}µs p90={:.1}µs p99={:.1}µs mean={:.1}µs",
            self.n,
            self.p50.as_secs_f64() * 1e6,
            self.p90.as_secs_f64() * 1e6,
            self.p99.as_secs_f64() * 1e6,
            self.mean.as_secs_f64() * 1e6
        )
    }
}
