//! How `status` shows the deploy history and the database identity.

use fencepost::deploy::{DeployHistory, Deployment};
use fencepost::identity::{IdentityState, RecordedIdentity};

/// The last deployment and how many are recorded, then the last `listed`
/// of them when asked for.
pub fn render_history(history: &DeployHistory, listed: Option<u32>) -> String {
    let mut out = match history.recent.first() {
        Some(last) => format!("last deployment: {} ({} recorded)\n", describe(last), history.recorded),
        None => {
            "last deployment: none recorded (the deploy history starts with this version's first migrate)\n".to_owned()
        }
    };
    if listed.is_some() && !history.recent.is_empty() {
        out += &format!(
            "\ndeployments (the last {} of {}, most recent first)\n",
            history.recent.len(),
            history.recorded
        );
        for deployment in &history.recent {
            out += &format!("  {}\n", describe(deployment));
        }
    }
    out
}

/// One deployment on one line.
fn describe(d: &Deployment) -> String {
    format!(
        "#{} at {} by {} with fencepost {}: {} migration(s), {} procedure(s) applied",
        d.id, d.deployed_at_utc, d.login, d.fencepost_version, d.migrations_applied, d.procedures_applied
    )
}

/// The identity line, after a blank line, naming who recorded the identity and when.
pub fn render_identity(state: IdentityState, recorded: Option<&RecordedIdentity>) -> String {
    let by = match (state, recorded) {
        (IdentityState::Matches | IdentityState::Changed { .. }, Some(r)) => {
            format!(" (recorded by {} at {})", r.recorded_by, r.recorded_at_utc)
        }
        _ => String::new(),
    };
    format!("\ndatabase identity: {state}{by}\n")
}

#[cfg(test)]
mod tests {
    use fencepost::identity::compare;
    use uuid::Uuid;

    use super::*;

    fn deployment(id: i32, migrations: i32) -> Deployment {
        Deployment {
            id,
            deployed_at_utc: "2026-01-02T03:04:05.1234567Z".into(),
            login: "deployer".into(),
            fencepost_version: "9.9.9".into(),
            migrations_applied: migrations,
            procedures_applied: 2,
            database_identity: None,
        }
    }

    fn two() -> DeployHistory {
        DeployHistory {
            recorded: 7,
            recent: vec![deployment(7, 0), deployment(6, 3)],
        }
    }

    #[test]
    fn the_last_deployment_says_who_when_which_version_and_what() {
        let text = render_history(&two(), None);
        assert_eq!(
            text,
            "last deployment: #7 at 2026-01-02T03:04:05.1234567Z by deployer with fencepost 9.9.9: 0 migration(s), \
             2 procedure(s) applied (7 recorded)\n"
        );
    }

    #[test]
    fn the_history_lists_the_recent_deployments_most_recent_first() {
        let text = render_history(&two(), Some(2));
        assert!(
            text.contains("deployments (the last 2 of 7, most recent first)\n  #7 at"),
            "{text}"
        );
        assert!(
            text.contains("\n  #6 at 2026-01-02T03:04:05.1234567Z by deployer with fencepost 9.9.9: 3 migration(s)"),
            "{text}"
        );
    }

    #[test]
    fn a_database_without_a_recorded_deployment_says_so() {
        let text = render_history(&DeployHistory::default(), Some(5));
        assert!(text.contains("last deployment: none recorded"), "{text}");
        assert!(!text.contains("deployments ("), "{text}");
    }

    #[test]
    fn the_identity_line_names_each_state() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let recorded = RecordedIdentity {
            recovery_fork: a,
            recorded_at_utc: "2026-01-02T03:04:05Z".into(),
            recorded_by: "deploy".into(),
        };
        assert_eq!(
            render_identity(compare(Some(a), Some(a)), Some(&recorded)),
            "\ndatabase identity: recorded, matches (recorded by deploy at 2026-01-02T03:04:05Z)\n"
        );
        let changed = render_identity(compare(Some(a), Some(b)), Some(&recorded));
        assert!(
            changed.starts_with("\ndatabase identity: restored or failed over (recorded ")
                && changed.contains("run `fencepost lease recover`"),
            "{changed}"
        );
        assert_eq!(
            render_identity(compare(None, None), None),
            "\ndatabase identity: cannot verify: the engine does not show a recovery fork\n"
        );
        assert!(render_identity(compare(None, Some(a)), None).contains("not recorded yet"));
    }
}
