//! What each shipped migration costs a live database: what it locks and for
//! how long, by edition. `migrate --dry-run` and docs/operating.md say it
//! before a pipeline applies it.
//!
//! While a migration runs, its schema-modification locks are held to its
//! commit, and on SQL Server every query on the table waits behind them (each
//! takes a schema-stability lock). So "moments" and "every row" are the two
//! answers an operator needs before a deploy during traffic.

/// The cost of the shipped migration `name` (e.g. `V4__row_lock_counter`);
/// `None` for a migration fencepost does not ship.
pub fn of(name: &str) -> Option<&'static str> {
    Some(match name {
        "V1__lease_tables" => "creates the fence tables: moments",
        "V2__exact_resource_keys" => {
            "copies fence.Resource and fence.PublishedOperation out and back on every edition: every row, \
             payloads included, written twice and fully logged, with both tables locked until it commits \
             (plan a maintenance window sized to the data; the log cannot truncate meanwhile)"
        }
        "V3__tenure_history_and_deployments" => {
            "adds a NULL column to fence.Resource (metadata only) and creates new tables: moments once its \
             schema lock is granted"
        }
        "V4__row_lock_counter" => {
            "adds a NOT NULL column with a default to fence.Resource: metadata only on Enterprise, Developer \
             and Azure SQL; on Standard, Web and Express every row is rewritten and fully logged while the \
             table is locked, so every fence call waits until it commits"
        }
        "V5__source_version" => {
            "adds NULL columns (metadata only); the two on fence.Resource carry CHECK constraints that read \
             every row once while the table is locked"
        }
        "V6__operator_operations" => {
            "creates an empty table (fence.OperatorOperation): touches no fence row and locks nothing a service's \
             call uses"
        }
        "V7__lifecycle" => {
            "creates a one-row table (fence.Retirement), re-checks fence.OperatorOperation's CHECK constraints \
             (every row of that operators' table read once while it is locked) and builds an index on \
             fence.PublishedOperation's time: an offline build reads every row of that table, and publishes \
             wait until it commits (size the window to the table: see docs/operating.md, Lifecycle)"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_migration_states_its_cost() {
        let sources = crate::source::Sources::embedded().expect("the shipped sources");
        for migration in sources.migrations() {
            assert!(of(&migration.name()).is_some(), "{} states no cost", migration.name());
        }
        assert_eq!(of("V100__a_users_own"), None);
    }
}
