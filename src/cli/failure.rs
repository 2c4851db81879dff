//! What a failed command tells a pipeline: one line on stderr, and with
//! `--format json` or `--format junit` a document on stdout too, so there is
//! always something to parse.

use fencepost::ConnectError;
use fencepost::bench::BenchError;
use fencepost::deploy::{Committed, DeployError};
use fencepost::source::SourceError;
use serde_json::json;

/// The error and its causes on one line, `: `-separated as anyhow's `{:#}`
/// prints them. Each error's message leaves its cause out (the cause is its
/// `source`), so each is printed once without filtering.
pub fn one_line(error: &anyhow::Error) -> String {
    format!("{error:#}")
}

/// What kind of failure this is, for a pipeline to branch on: `connect`,
/// `source`, `lock_timeout`, `deploy`, `not_deployed`, `bench`, `interrupted`,
/// `store` (an object store failed or cannot be trusted), `artifact` (a
/// published artefact is missing, corrupt or no pointer), `fence` (a fence
/// call of an artefact command failed), `outcome_unknown` (an operator
/// command that may or may not have applied: send it again with its
/// operation id), or `usage` for input the command itself refused.
pub fn kind(error: &anyhow::Error) -> &'static str {
    for cause in error.chain() {
        if let Some(fencepost::client::Error::OperatorOutcomeUnknown { .. }) =
            cause.downcast_ref::<fencepost::client::Error>()
        {
            return "outcome_unknown";
        }
        if cause.is::<ConnectError>() {
            return "connect";
        }
        // Its connect error is transparent: the chain goes on past it.
        if let Some(fencepost::client::Error::Connect(_)) = cause.downcast_ref::<fencepost::client::Error>() {
            return "connect";
        }
        if cause.is::<SourceError>() {
            return "source";
        }
        if let Some(deploy) = cause.downcast_ref::<DeployError>() {
            return match deploy {
                DeployError::Source(_) => "source",
                DeployError::Connect(_) => "connect",
                DeployError::LockTimeout { .. } => "lock_timeout",
                _ => "deploy",
            };
        }
        #[cfg(feature = "artifacts")]
        if let Some(kind) = cause
            .downcast_ref::<fencepost::artifact::ArtifactError>()
            .and_then(artifact_kind)
        {
            return kind;
        }
        if let Some(bench) = cause.downcast_ref::<BenchError>() {
            return match bench {
                BenchError::NotDeployed { .. } => "not_deployed",
                BenchError::Connect(_) => "connect",
                BenchError::Interrupted => "interrupted",
                _ => "bench",
            };
        }
    }
    "usage"
}

/// The kind of an artefact command's failure, or `None` when the cause
/// after it (the fence call's own error) says.
#[cfg(feature = "artifacts")]
fn artifact_kind(error: &fencepost::artifact::ArtifactError) -> Option<&'static str> {
    use fencepost::artifact::ArtifactError;
    Some(match error {
        ArtifactError::Store { .. }
        | ArtifactError::CreateNotEnforced { .. }
        | ArtifactError::CreateUnsupported { .. }
        | ArtifactError::ProbeNotKept { .. } => "store",
        ArtifactError::NotProvisioned { .. }
        | ArtifactError::NothingPublished { .. }
        | ArtifactError::NotAPointer { .. }
        | ArtifactError::Missing { .. }
        | ArtifactError::Corrupt { .. } => "artifact",
        ArtifactError::Fence(fencepost::client::Error::Connect(_)) => return None,
        ArtifactError::Fence(_) => "fence",
        _ => "usage",
    })
}

/// `{"error": {"kind", "message"}}`; for a deploy that stopped half way,
/// also `"completed": false` and what it had committed (which stays); for
/// an operator command whose outcome is unknown, its `"operation_id"`.
pub fn json(error: &anyhow::Error) -> String {
    let mut document = json!({
        "error": { "kind": kind(error), "message": one_line(error) },
    });
    let unknown = error
        .chain()
        .filter_map(|c| c.downcast_ref::<fencepost::client::Error>())
        .find_map(fencepost::client::Error::unknown_operation);
    if let Some(operation_id) = unknown {
        document["error"]["operation_id"] = json!(operation_id);
    }
    if let Some(deploy) = error.chain().find_map(|c| c.downcast_ref::<DeployError>()) {
        let committed = match deploy {
            DeployError::Incomplete { committed, .. } => committed.as_ref().clone(),
            _ => Committed::default(),
        };
        document["completed"] = json!(false);
        document["committed"] = json!(committed);
    }
    serde_json::to_string_pretty(&document).unwrap_or_default()
}

/// A JUnit document with one test case, `fencepost`, in error.
pub fn junit(command: &str, error: &anyhow::Error) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
    status.set_type(kind(error));
    status.set_message(one_line(error));
    let mut suite = TestSuite::new(format!("fencepost {command}"));
    suite.add_test_case(TestCase::new("fencepost", status));
    let mut report = Report::new("fencepost");
    report.add_test_suite(suite);
    report.to_string().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_of_three_is_printed_once_each_in_order() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let error = anyhow::Error::new(SourceError::Unreadable {
            path: "/x/migrations".into(),
            source: io,
        })
        .context("reading T-SQL from /x");
        assert_eq!(error.chain().count(), 3);
        assert_eq!(
            one_line(&error),
            "reading T-SQL from /x: cannot read /x/migrations: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn a_cause_whose_text_an_earlier_message_holds_is_still_printed() {
        // The old substring filter dropped "timed out" here, a different cause.
        let error = anyhow::Error::new(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"))
            .context("the login timed out once before; retrying");
        assert_eq!(one_line(&error), "the login timed out once before; retrying: timed out");
    }

    #[cfg(feature = "artifacts")]
    #[test]
    fn an_untrusted_store_and_a_corrupt_artefact_are_kinds_of_their_own() {
        use fencepost::artifact::ArtifactError;
        let untrusted = anyhow::Error::new(ArtifactError::CreateNotEnforced {
            store: "s3://bucket".into(),
            probe: "p/.probe".into(),
        })
        .context("verifying the store");
        assert_eq!(kind(&untrusted), "store");
        let corrupt = anyhow::Error::new(ArtifactError::Corrupt {
            key: "report".into(),
            location: "p/report/1/x".into(),
            what: "size 3, expected 4".into(),
        });
        assert_eq!(kind(&corrupt), "artifact");
        let grace = anyhow::Error::new(ArtifactError::GraceTooShort {
            grace: std::time::Duration::from_secs(60),
            longest_lease: std::time::Duration::from_secs(3600),
        });
        assert_eq!(kind(&grace), "usage");
    }

    #[test]
    fn an_operator_command_whose_outcome_is_unknown_names_its_operation_id_in_json() {
        let operation = uuid::Uuid::new_v4();
        let error = anyhow::Error::new(fencepost::client::Error::OperatorOutcomeUnknown {
            procedure: "fence_admin.ForceRelease",
            operation_id: operation,
            reason: "connection reset; its replay failed too: no connection".into(),
        })
        .context("report:daily: no answer came");
        let document: serde_json::Value = serde_json::from_str(&json(&error)).unwrap();
        assert_eq!(document["error"]["kind"], "outcome_unknown");
        assert_eq!(document["error"]["operation_id"], operation.to_string());
        assert!(
            document["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&operation.to_string())
        );
    }

    #[test]
    fn input_the_command_refused_is_a_usage_error_in_json() {
        let error = anyhow::anyhow!("no connection given");
        let document: serde_json::Value = serde_json::from_str(&json(&error)).unwrap();
        assert_eq!(document["error"]["kind"], "usage");
        assert_eq!(document["error"]["message"], "no connection given");
        assert!(document.get("completed").is_none());
    }

    /// A deploy that stopped after committing a migration and a procedure.
    fn stopped_part_way() -> anyhow::Error {
        use fencepost::deploy::{Change, ProcedureState};
        let committed = Committed::new(
            vec![
                Change::Migration { name: "V2__b".into() },
                Change::Procedure {
                    name: "fence_api.New".into(),
                    was: ProcedureState::Missing,
                },
            ],
            vec![],
        );
        anyhow::Error::new(DeployError::Incomplete {
            committed: Box::new(committed),
            cause: Box::new(DeployError::BatchFailed {
                file: "permissions/010_roles.sql".into(),
                batch: 1,
                line: 3,
                message: "Msg 15151: cannot find the user".into(),
            }),
        })
    }

    #[test]
    fn a_deploy_that_stopped_part_way_says_what_it_had_committed_in_text_and_json() {
        let error = stopped_part_way();
        let line = one_line(&error);
        assert!(
            line.starts_with(
                "the deploy stopped part-way; committed and kept: migration V2__b, procedure fence_api.New;"
            ),
            "{line}"
        );
        assert!(
            line.ends_with("permissions/010_roles.sql, batch 1 (line 3): Msg 15151: cannot find the user"),
            "{line}"
        );
        let document: serde_json::Value = serde_json::from_str(&json(&error)).unwrap();
        assert_eq!(document["error"]["kind"], "deploy");
        assert_eq!(document["completed"], false);
        assert_eq!(document["committed"]["changes"][0]["kind"], "migration");
        assert_eq!(document["committed"]["changes"][0]["name"], "V2__b");
        assert_eq!(document["committed"]["changes"][1]["name"], "fence_api.New");
        assert_eq!(document["committed"]["without_grants"][0], "fence_api.New");
    }

    #[test]
    fn the_junit_document_has_one_test_case_in_error() {
        let text = junit("check", &anyhow::anyhow!("cannot reach db:1433"));
        assert!(text.contains("<testsuite name=\"fencepost check\""), "{text}");
        assert!(text.contains("errors=\"1\""), "{text}");
        assert!(text.contains("message=\"cannot reach db:1433\""), "{text}");
    }
}
