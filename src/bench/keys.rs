//! The bench's own names: every key and the scratch table carry a run id
//! under the chosen prefix, so two runs never share a row and cleanup deletes
//! nothing the bench did not make.

use uuid::Uuid;

use crate::Connection;

/// The names of one run.
#[derive(Clone, Debug)]
pub(crate) struct RunKeys {
    /// `<prefix><run id>/`: every key of this run starts with it.
    pub root: String,
    /// The run id alone, for names that are identifiers.
    pub run: String,
}

impl RunKeys {
    pub(crate) fn new(prefix: &str) -> RunKeys {
        let run = Uuid::new_v4().simple().to_string()[..12].to_string();
        RunKeys {
            root: format!("{prefix}{run}/"),
            run,
        }
    }

    /// The key of `workload` for `worker`, or the one key a workload shares.
    pub(crate) fn key(&self, workload: &str, worker: Option<usize>) -> String {
        match worker {
            Some(w) => format!("{}{workload}/{w}", self.root),
            None => format!("{}{workload}", self.root),
        }
    }

    /// The scratch table's name, unqualified: it goes to the login's default
    /// schema, where a login with CREATE TABLE may create it.
    pub(crate) fn scratch_table(&self) -> String {
        format!("fencepost_bench_{}", self.run)
    }

    /// Deletes this run's fence rows, their publish and operator-command
    /// records and their tenure history (which has no foreign key to hold it back). Fails for a
    /// login without DELETE on the fence tables (a service): the caller says
    /// what was left.
    /// A LIKE pattern matching this run's keys and nothing else: the prefix
    /// is the user's, so LIKE's wildcards in it are escaped.
    pub(crate) fn like_pattern(&self) -> String {
        format!(
            "{}%",
            self.root.replace('[', "[[]").replace('_', "[_]").replace('%', "[%]")
        )
    }

    pub(crate) async fn delete(&self, admin: &mut Connection) -> Result<(), tiberius::error::Error> {
        let pattern = self.like_pattern();
        admin
            .execute(
                "DELETE FROM fence.OperatorOperation WHERE ResourceKey LIKE @P1; \
                 DELETE FROM fence.PublishedOperation WHERE ResourceKey LIKE @P1; \
                 DELETE FROM fence.Tenure WHERE ResourceKey LIKE @P1; \
                 DELETE FROM fence.Resource WHERE ResourceKey LIKE @P1;",
                &[&pattern],
            )
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_run_is_under_its_root() {
        let keys = RunKeys::new("fencepost-bench:");
        assert!(keys.key("cycle", Some(3)).starts_with(&keys.root));
        assert!(keys.root.starts_with("fencepost-bench:"));
        assert_ne!(keys.key("cycle", Some(0)), keys.key("cycle", Some(1)));
    }

    #[test]
    fn two_runs_never_share_a_root() {
        assert_ne!(RunKeys::new("p").root, RunKeys::new("p").root);
    }
}
