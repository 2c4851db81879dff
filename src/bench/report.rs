//! What a run measured, as the JSON document `--format json` prints and as
//! the text table.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::held::Held;
use super::stats::round;
use super::telemetry::TelemetryRecorded;

/// The scenarios every other one is compared with, in the order they run.
pub const BASELINES: [&str; 3] = ["select1", "raw_update", "applock_cycle"];

/// One run of the bench.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The engine, as it names itself.
    pub engine: String,
    /// Concurrent workers, each on a connection of its own.
    pub workers: u32,
    /// The largest resident memory the bench process had, in KiB: the
    /// clients, the baselines' connections and the bench's fixed-size
    /// histograms. `null` where the platform cannot tell.
    pub client_peak_memory_kib: Option<u64>,
    /// Whether the run had a `tracing` layer and a `metrics` recorder
    /// recording every call ([`BenchOptions::telemetry`](super::BenchOptions::telemetry)):
    /// two runs' CPU per operation, one with and one without, is what
    /// observability costs.
    pub telemetry: bool,
    /// What the layer and the recorder saw; `null` without telemetry.
    pub telemetry_recorded: Option<TelemetryRecorded>,
    /// Every scenario that ran, baselines first.
    pub scenarios: Vec<Scenario>,
    /// What holding many leases at once cost (`--workload held`), each size
    /// renewing together and then one by one; empty when it did not run.
    pub held: Vec<Held>,
}

/// One measured scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    /// `select1`, `raw_update`, `applock_cycle`, `acquire`, `publish`,
    /// `release`, `fenced_cycle`, `contended`, `contended_guarded`, `renew`,
    /// `applock_handover`, `handover` or `handover_polling`.
    pub name: String,
    /// Operations measured (warm-up excluded).
    pub operations: u64,
    /// Operations per second over all workers.
    pub ops_per_s: f64,
    /// Median latency of one operation.
    pub p50_ms: f64,
    /// 95th percentile latency.
    pub p95_ms: f64,
    /// 99th percentile latency.
    pub p99_ms: f64,
    /// The longest latency of any operation: what the slowest waiter waited.
    pub max_ms: f64,
    /// Requests sent per operation, counted as they were sent.
    pub round_trips_per_op: f64,
    /// CPU time (user and system) the bench process spent per operation
    /// while measuring; the scenarios of one workload share it by the
    /// requests each sent. `null` where the platform cannot tell.
    pub client_cpu_us_per_op: Option<f64>,
    /// This scenario's p50 divided by each baseline's p50 (itself left out).
    pub ratio_to: BTreeMap<String, f64>,
}

impl Report {
    /// Fills every scenario's `ratio_to` from the baselines that ran.
    pub fn compute_ratios(&mut self) {
        let baselines: Vec<(String, f64)> = self
            .scenarios
            .iter()
            .filter(|s| BASELINES.contains(&s.name.as_str()) && s.p50_ms > 0.0)
            .map(|s| (s.name.clone(), s.p50_ms))
            .collect();
        for scenario in &mut self.scenarios {
            scenario.ratio_to = baselines
                .iter()
                .filter(|(name, _)| *name != scenario.name)
                .map(|(name, p50)| (name.clone(), round(scenario.p50_ms / p50, 2)))
                .collect();
        }
    }

    /// A table for people: one row per scenario, and the p50 ratio to each
    /// baseline that ran.
    pub fn to_text(&self) -> String {
        let baselines: Vec<&str> = BASELINES
            .iter()
            .copied()
            .filter(|b| self.scenarios.iter().any(|s| s.name == *b))
            .collect();
        let mut header = vec![
            "scenario",
            "ops",
            "ops/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "round trips/op",
            "client CPU us/op",
        ];
        let ratio_headers: Vec<String> = baselines.iter().map(|b| format!("p50 / {b}")).collect();
        header.extend(ratio_headers.iter().map(String::as_str));
        let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
        for s in &self.scenarios {
            let mut row = vec![
                s.name.clone(),
                s.operations.to_string(),
                format!("{:.0}", s.ops_per_s),
                format!("{:.2}", s.p50_ms),
                format!("{:.2}", s.p95_ms),
                format!("{:.2}", s.p99_ms),
                format!("{:.2}", s.max_ms),
                format!("{:.2}", s.round_trips_per_op),
                s.client_cpu_us_per_op.map_or("-".to_string(), |c| format!("{c:.0}")),
            ];
            row.extend(
                baselines
                    .iter()
                    .map(|b| s.ratio_to.get(*b).map_or("-".to_string(), |r| format!("{r:.2}"))),
            );
            rows.push(row);
        }
        let memory = self
            .client_peak_memory_kib
            .map_or("unknown".to_string(), |kib| format!("{kib} KiB"));
        let telemetry = match (self.telemetry, self.telemetry_recorded) {
            (false, _) => "off".to_string(),
            (true, None) => "on".to_string(),
            (true, Some(seen)) => match seen.call_durations_recorded {
                Some(durations) => format!(
                    "on ({} lines formatted, {durations} call durations recorded)",
                    seen.lines_formatted
                ),
                None => format!("on ({} lines formatted, no metrics)", seen.lines_formatted),
            },
        };
        let mut out = format!(
            "engine: {}\nworkers: {}\nclient peak memory: {memory}\ntelemetry: {telemetry}\n\n",
            self.engine, self.workers
        );
        if !self.scenarios.is_empty() {
            out.push_str(&markdown_table(&rows));
        }
        if !self.held.is_empty() {
            if !self.scenarios.is_empty() {
                out.push('\n');
            }
            out.push_str(&markdown_table(&held_rows(&self.held)));
        }
        out
    }
}

/// The rows of `held`, a header first.
fn held_rows(held: &[Held]) -> Vec<Vec<String>> {
    let header = [
        "held guards",
        "renewals",
        "window s",
        "server sessions",
        "calls/s",
        "signal requests/s",
        "server CPU us/lease/s",
        "client bytes/lease",
        "lost",
    ];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_string());
    for h in held {
        rows.push(vec![
            h.guards.to_string(),
            match h.renewals {
                super::held::Renewals::Together => "together".to_string(),
                super::held::Renewals::OneByOne => "one by one".to_string(),
            },
            format!("{:.1}", h.window_s),
            or_dash(h.server_sessions.map(|n| n.to_string())),
            format!("{:.1}", h.calls_per_s),
            format!("{:.1}", h.signal_requests_per_s),
            or_dash(h.server_cpu_us_per_lease_s.map(|c| format!("{c:.2}"))),
            or_dash(h.client_bytes_per_lease.map(|b| format!("{b:.0}"))),
            h.lost.to_string(),
        ]);
    }
    rows
}

/// `rows` (a header first) as a Markdown table: the first column aligned
/// left, the others, numbers, right.
fn markdown_table(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        if i == 0 {
            // Markdown: numbers align right, the colon against the pipe.
            let rule: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(c, w)| {
                    if c == 0 {
                        "-".repeat(w + 2)
                    } else {
                        format!("{}:", "-".repeat(w + 1))
                    }
                })
                .collect();
            let _ = writeln!(out, "|{}|", rule.join("|"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(name: &str, p50_ms: f64) -> Scenario {
        Scenario {
            name: name.to_string(),
            operations: 10,
            ops_per_s: 100.0,
            p50_ms,
            p95_ms: p50_ms,
            p99_ms: p50_ms,
            max_ms: p50_ms,
            round_trips_per_op: 1.0,
            client_cpu_us_per_op: Some(42.0),
            ratio_to: BTreeMap::new(),
        }
    }

    fn report(scenarios: Vec<Scenario>) -> Report {
        let mut report = Report {
            engine: "engine".into(),
            workers: 2,
            client_peak_memory_kib: Some(1024),
            telemetry: false,
            telemetry_recorded: None,
            scenarios,
            held: Vec::new(),
        };
        report.compute_ratios();
        report
    }

    #[test]
    fn each_scenario_is_compared_with_every_baseline_but_itself() {
        let r = report(vec![
            scenario("select1", 1.0),
            scenario("raw_update", 2.0),
            scenario("acquire", 3.0),
        ]);
        assert_eq!(r.scenarios[2].ratio_to["select1"], 3.0);
        assert_eq!(r.scenarios[2].ratio_to["raw_update"], 1.5);
        assert!(!r.scenarios[0].ratio_to.contains_key("select1"));
        assert_eq!(r.scenarios[1].ratio_to["select1"], 2.0);
    }

    #[test]
    fn a_skipped_baseline_is_in_no_ratio_and_no_column() {
        let r = report(vec![scenario("select1", 1.0), scenario("acquire", 3.0)]);
        assert!(!r.scenarios[1].ratio_to.contains_key("raw_update"));
        assert!(!r.to_text().contains("raw_update"));
    }

    #[test]
    fn the_text_is_a_markdown_table_with_numbers_aligned_right() {
        let text = report(vec![scenario("select1", 1.0)]).to_text();
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].starts_with("|----") && lines[1].ends_with("-:|"), "{text}");
        assert!(!lines[1].contains(":-"), "{text}");
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{text}");
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let r = report(vec![scenario("select1", 1.0)]);
        let json = serde_json::to_value(&r).unwrap();
        // serde_json's map is sorted here: compare the set of keys.
        let keys: Vec<&String> = json["scenarios"][0].as_object().unwrap().keys().collect();
        let mut expected = [
            "name",
            "operations",
            "ops_per_s",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "max_ms",
            "round_trips_per_op",
            "client_cpu_us_per_op",
            "ratio_to",
        ];
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(json["workers"], 2);
        assert_eq!(json["engine"], "engine");
        assert_eq!(json["client_peak_memory_kib"], 1024);
        assert_eq!(json["telemetry"], false);
        assert!(json["telemetry_recorded"].is_null());
    }

    fn held(guards: u32, renewals: super::super::held::Renewals, cpu: Option<f64>) -> Held {
        Held {
            guards,
            renewals,
            window_s: 11.0,
            server_sessions: Some(5),
            calls_per_s: 1.2,
            signal_requests_per_s: 1.0,
            server_cpu_us_per_lease_s: cpu,
            client_bytes_per_lease: Some(900.0),
            lost: 0,
        }
    }

    #[test]
    fn held_is_a_second_table_and_a_list_in_the_json() {
        use super::super::held::Renewals;
        let mut r = report(vec![scenario("select1", 1.0)]);
        assert!(serde_json::to_value(&r).unwrap()["held"].as_array().unwrap().is_empty());
        r.held = vec![
            held(1000, Renewals::Together, None),
            held(1000, Renewals::OneByOne, Some(3.25)),
        ];
        let text = r.to_text();
        let tables: Vec<&str> = text.split("\n\n").filter(|t| t.starts_with('|')).collect();
        assert_eq!(tables.len(), 2, "{text}");
        assert!(tables[1].starts_with("| held guards |"), "{text}");
        assert!(
            tables[1].contains("| together |") || tables[1].contains("together |"),
            "{text}"
        );
        assert!(tables[1].contains("3.25"), "{text}");
        let json = serde_json::to_value(&r).unwrap();
        let row = &json["held"][1];
        let mut keys: Vec<&String> = row.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "calls_per_s",
                "client_bytes_per_lease",
                "guards",
                "lost",
                "renewals",
                "server_cpu_us_per_lease_s",
                "server_sessions",
                "signal_requests_per_s",
                "window_s",
            ]
        );
        assert_eq!(row["renewals"], "one_by_one");
        assert!(json["held"][0]["server_cpu_us_per_lease_s"].is_null());
    }

    #[test]
    fn a_run_with_telemetry_says_so_and_what_was_recorded() {
        let mut r = report(vec![scenario("select1", 1.0)]);
        assert!(r.to_text().contains("\ntelemetry: off\n"), "{}", r.to_text());
        r.telemetry = true;
        r.telemetry_recorded = Some(TelemetryRecorded {
            lines_formatted: 12,
            call_durations_recorded: Some(5),
        });
        let text = r.to_text();
        assert!(
            text.contains("\ntelemetry: on (12 lines formatted, 5 call durations recorded)\n"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["telemetry"], true);
        assert_eq!(json["telemetry_recorded"]["lines_formatted"], 12);
        assert_eq!(json["telemetry_recorded"]["call_durations_recorded"], 5);
    }
}
