//! The selftest's report: the engine and its settings, then one entry per
//! check with what it expected and what it saw.

use serde::Serialize;

use super::engine::EngineFacts;
use super::scratch::ScratchDatabase;

/// How a check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The schedule ran and the engine answered as the document says.
    Passed,
    /// The schedule ran and the engine answered otherwise (or a call failed).
    Failed,
    /// The schedule did not run, for the reason in `seen`.
    Skipped,
}

impl Status {
    /// The word the text report shows.
    pub fn word(self) -> &'static str {
        match self {
            Status::Passed => "held",
            Status::Failed => "FAILED",
            Status::Skipped => "skipped",
        }
    }
}

/// One check's entry.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// A short, stable name (`handover`, `row_lock_bound`, ...).
    pub name: String,
    /// The behaviour the check forces.
    pub behaviour: String,
    /// The document it follows: a DESIGN semantic, a contract section, an
    /// engines.md row, a behaviour number (B1–B20).
    pub document: String,
    /// What the document says the engine answers, under the settings in effect.
    pub expected: String,
    /// What the engine answered; for a skipped check, why it did not run.
    pub seen: String,
    /// Passed, failed or skipped.
    pub status: Status,
    /// How long the check took, in milliseconds.
    pub elapsed_ms: u64,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The engine and the settings the checks ran under.
    pub engine: EngineFacts,
    /// Every key the run made starts with this.
    pub key_root: String,
    /// What the run did with its rows in the fence tables.
    pub left_behind: String,
    /// The run meant to delete its rows and some are still there (the
    /// header says which and why). Rows kept because the login may not
    /// delete are not this: the next run reuses them.
    pub rows_left: bool,
    /// One entry per check, in the order they ran.
    pub checks: Vec<CheckReport>,
    /// The run was stopped (Ctrl-C) before every check it was asked for ran.
    pub interrupted: bool,
    /// The checks the run was asked for but did not run, because it was
    /// interrupted; empty otherwise.
    pub not_run: Vec<String>,
    /// The scratch database the checks that act on every key ran in, when
    /// the run made one: its name, its settings, and whether it was dropped.
    pub scratch_database: Option<ScratchDatabase>,
}

impl Report {
    /// How many checks ended with `status`.
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// Every check that ran held.
    pub fn all_held(&self) -> bool {
        self.count(Status::Failed) == 0
    }

    /// At least one check held: a run in which every check was skipped (or
    /// none ran) proved nothing and must not pass.
    pub fn proved_something(&self) -> bool {
        self.count(Status::Passed) > 0
    }

    /// What the run meant to remove and could not: its rows (when the
    /// login may delete them) and its scratch database; empty when nothing.
    pub fn left_behind_by_the_run(&self) -> Vec<String> {
        let mut left = Vec::new();
        if self.rows_left {
            left.push(format!("rows in the fence tables: {}", self.left_behind));
        }
        if let Some(scratch) = self.scratch_database.as_ref().filter(|s| !s.dropped) {
            left.push(format!("the scratch database {}: {}", scratch.name, scratch.outcome));
        }
        left
    }

    /// The report as text: the header, then one block per check.
    pub fn to_text(&self) -> String {
        let e = &self.engine;
        let on_off = |v: Option<bool>| match v {
            Some(true) => "ON",
            Some(false) => "OFF",
            None => "not shown by this engine",
        };
        let mut out = format!(
            "fencepost selftest of database {} as {}\n\
             engine: {}{}\n\
             READ_COMMITTED_SNAPSHOT: {}; ALLOW_SNAPSHOT_ISOLATION: {}; optimized locking: {}\n\
             compatibility level: {}; collation: {}\n\
             keys: {}* ({})\n",
            e.database,
            e.login,
            e.name(),
            if e.is_azure() { " [Azure]" } else { "" },
            on_off(e.read_committed_snapshot),
            on_off(e.allow_snapshot_isolation),
            on_off(e.optimized_locking),
            e.compatibility_level.map_or("unknown".to_string(), |l| l.to_string()),
            e.collation.as_deref().unwrap_or("unknown"),
            self.key_root,
            self.left_behind,
        );
        if let Some(scratch) = &self.scratch_database {
            out.push_str(&format!(
                "scratch database: {} ({}){}\n",
                scratch.name,
                scratch.outcome,
                if scratch.differs.is_empty() {
                    String::new()
                } else {
                    format!("; its settings differ: {}", scratch.differs.join("; "))
                }
            ));
        }
        out.push('\n');
        for c in &self.checks {
            out.push_str(&format!(
                "{:<7} {} ({})\n        behaviour: {}\n        document:  {}\n        expected:  {}\n        {}      {}\n",
                c.status.word(),
                c.name,
                seconds(c.elapsed_ms),
                c.behaviour,
                c.document,
                c.expected,
                if c.status == Status::Skipped { "why: " } else { "saw: " },
                c.seen,
            ));
        }
        if self.interrupted {
            out.push_str(&format!(
                "\nINTERRUPTED: the run was stopped before these checks ran: {}\n",
                if self.not_run.is_empty() {
                    "(none)".to_string()
                } else {
                    self.not_run.join(", ")
                }
            ));
        }
        out.push_str(&format!(
            "\n{} held, {} failed, {} skipped{}\n",
            self.count(Status::Passed),
            self.count(Status::Failed),
            self.count(Status::Skipped),
            if self.interrupted {
                format!(", {} not run (interrupted)", self.not_run.len())
            } else {
                String::new()
            }
        ));
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        // A report of strings, numbers and booleans always serializes.
        serde_json::to_string_pretty(self).expect("a selftest report serializes") + "\n"
    }

    /// The report as JUnit XML: one test case per check, a skipped check as skipped.
    pub fn to_junit(&self) -> String {
        use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
        let mut suite = TestSuite::new(format!("fencepost selftest of {}", self.engine.database));
        for c in &self.checks {
            let detail = format!(
                "behaviour: {}\ndocument: {}\nexpected: {}\nsaw: {}",
                c.behaviour, c.document, c.expected, c.seen
            );
            let status = match c.status {
                Status::Passed => TestCaseStatus::success(),
                Status::Failed => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_message(c.seen.clone()).set_description(detail.clone());
                    status
                }
                Status::Skipped => {
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(c.seen.clone());
                    status
                }
            };
            let mut case = TestCase::new(c.name.clone(), status);
            case.set_classname("fencepost.selftest")
                .set_time(std::time::Duration::from_millis(c.elapsed_ms))
                .set_system_out(detail);
            suite.add_test_case(case);
        }
        // A check an interrupted run never reached is no pass: each is a
        // skipped case saying why, so a pipeline sees the run was cut short.
        for name in &self.not_run {
            let mut status = TestCaseStatus::skipped();
            status.set_message("not run: the selftest was interrupted");
            let mut case = TestCase::new(name.clone(), status);
            case.set_classname("fencepost.selftest");
            suite.add_test_case(case);
        }
        if self.interrupted {
            suite.add_property(quick_junit::Property::new("interrupted", "true"));
        }
        if let Some(scratch) = &self.scratch_database {
            suite.add_property(quick_junit::Property::new("scratch_database", scratch.name.clone()));
            suite.add_property(quick_junit::Property::new(
                "scratch_database_outcome",
                scratch.outcome.clone(),
            ));
        }
        let mut junit = quick_junit::Report::new("fencepost selftest");
        junit.add_test_suite(suite);
        // Serializing to memory fails only on invalid XML names, and ours are fixed.
        let mut xml = junit.to_string().expect("a report serializes to JUnit XML");
        if !xml.ends_with('\n') {
            xml.push('\n');
        }
        xml
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, status: Status, seen: &str) -> CheckReport {
        CheckReport {
            name: name.to_string(),
            behaviour: "a behaviour".to_string(),
            document: "DESIGN semantics 1".to_string(),
            expected: "Superseded".to_string(),
            seen: seen.to_string(),
            status,
            elapsed_ms: 1500,
        }
    }

    fn report() -> Report {
        Report {
            engine: EngineFacts {
                database: "app".to_string(),
                read_committed_snapshot: Some(true),
                ..EngineFacts::default()
            },
            key_root: "fencepost-selftest:abc/".to_string(),
            left_behind: "deleted at the end of the run".to_string(),
            rows_left: false,
            checks: vec![
                entry("handover", Status::Passed, "Superseded"),
                entry("late_release_and_renew", Status::Failed, "Released"),
                entry("attention", Status::Skipped, "the engine cannot"),
            ],
            interrupted: false,
            not_run: Vec::new(),
            scratch_database: None,
        }
    }

    #[test]
    fn an_interrupted_run_says_so_and_names_the_checks_not_run_in_every_format() {
        let mut report = report();
        report.interrupted = true;
        report.not_run = vec!["list_prefix_is_literal".to_string(), "service_login_rights".to_string()];
        let text = report.to_text();
        assert!(
            text.contains(
                "INTERRUPTED: the run was stopped before these checks ran: list_prefix_is_literal, service_login_rights"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("1 held, 1 failed, 1 skipped, 2 not run (interrupted)\n"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["interrupted"], serde_json::Value::Bool(true));
        assert_eq!(json["not_run"][1], "service_login_rights");
        let junit = report.to_junit();
        assert!(junit.contains("tests=\"5\""), "{junit}");
        assert!(junit.contains("skipped=\"3\""), "{junit}");
        assert!(junit.contains("not run: the selftest was interrupted"), "{junit}");
        assert!(junit.contains("name=\"interrupted\" value=\"true\""), "{junit}");
    }

    #[test]
    fn a_run_in_which_nothing_held_proved_nothing() {
        let mut report = report();
        assert!(report.proved_something());
        report.checks.retain(|c| c.status == Status::Skipped);
        assert!(report.all_held());
        assert!(!report.proved_something());
    }

    #[test]
    fn text_shows_the_settings_and_each_checks_expectation_and_answer() {
        let text = report().to_text();
        assert!(text.contains("READ_COMMITTED_SNAPSHOT: ON"), "{text}");
        assert!(text.contains("held    handover (1.5 s)"), "{text}");
        assert!(text.contains("FAILED  late_release_and_renew"), "{text}");
        assert!(text.contains("why:       the engine cannot"), "{text}");
        assert!(text.contains("saw:       Released"), "{text}");
        assert!(text.ends_with("1 held, 1 failed, 1 skipped\n"), "{text}");
    }

    #[test]
    fn rows_the_run_could_not_delete_and_a_scratch_database_not_dropped_are_named() {
        let mut report = report();
        assert!(report.left_behind_by_the_run().is_empty());
        report.rows_left = true;
        report.left_behind = "LEFT BEHIND: the rows of 20 keys".to_string();
        report.scratch_database = Some(ScratchDatabase {
            name: "fencepost_selftest_ab12".to_string(),
            engine: EngineFacts::default(),
            differs: Vec::new(),
            dropped: false,
            outcome: "LEFT BEHIND: drop it yourself".to_string(),
        });
        let left = report.left_behind_by_the_run();
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left[0].contains("the rows of 20 keys"), "{left:?}");
        assert!(left[1].contains("fencepost_selftest_ab12"), "{left:?}");
    }

    #[test]
    fn a_failed_check_fails_the_run_and_a_skipped_one_does_not() {
        let mut report = report();
        assert!(!report.all_held());
        report.checks.remove(1);
        assert!(report.all_held());
    }

    #[test]
    fn json_and_junit_carry_each_checks_status() {
        let json: serde_json::Value = serde_json::from_str(&report().to_json()).unwrap();
        let statuses: Vec<&str> = json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["passed", "failed", "skipped"]);
        let junit = report().to_junit();
        assert!(junit.contains("tests=\"3\""), "{junit}");
        assert!(junit.contains("failures=\"1\""), "{junit}");
        assert!(junit.contains("skipped=\"1\""), "{junit}");
        assert!(junit.contains("<skipped message=\"the engine cannot\""), "{junit}");
    }
}
