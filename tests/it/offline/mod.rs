//! Tests that need no server: the binary, the audit on fixtures, the
//! connection string and loopback stand-ins.

mod artifact_cli;
mod artifact_probe;
mod artifact_read;
mod artifact_store;
mod artifact_sweep_edges;
mod audit_code_paths;
mod audit_hidden_paths;
mod audit_hierarchy;
mod audit_implied;
mod audit_long_chains;
mod audit_offline;
mod audit_outside;
mod audit_reach;
mod audit_reach_acting_leaves;
mod audit_reach_agent;
mod audit_reach_assemblies;
mod audit_reach_attack_probes;
mod audit_reach_attack_probes2;
mod audit_reach_attack_probes3;
mod audit_reach_attack_probes4;
mod audit_reach_attack_probes5;
mod audit_reach_attack_probes6;
mod audit_reach_attack_probes7;
mod audit_reach_attack_probes8;
mod audit_reach_cascades;
mod audit_reach_chained_callers;
mod audit_reach_code;
mod audit_reach_column_denies;
mod audit_reach_created_objects;
mod audit_reach_database_denies;
mod audit_reach_denies;
mod audit_reach_documented_layouts;
mod audit_reach_execute_as_user_named_owner;
mod audit_reach_expressions;
mod audit_reach_guest;
mod audit_reach_inherited;
mod audit_reach_leaving_roles;
mod audit_reach_lending_calls;
mod audit_reach_lending_modules;
mod audit_reach_lending_targets;
mod audit_reach_lending_triggers;
mod audit_reach_lent_ddl;
mod audit_reach_lent_walk;
mod audit_reach_logins;
mod audit_reach_module_reading;
mod audit_reach_name_folding;
mod audit_reach_name_resolution;
mod audit_reach_order;
mod audit_reach_ownership;
mod audit_reach_paths;
mod audit_reach_read_only_modules;
mod audit_reach_revert;
mod audit_reach_run_time_sql;
mod audit_reach_server;
mod audit_reach_signed_caller_denies;
mod audit_reach_signing_login;
mod audit_reach_synonym_grants;
mod audit_reach_trigger_events;
mod audit_reach_trustworthy;
mod audit_reach_view_derivations;
mod audit_reach_view_updates;
mod audit_reach_views;
mod audit_reach_write_chains;
mod audit_render;
mod audit_rules;
mod audit_server;
mod audit_services;
mod check_report_schema;
mod cli;
mod cli_output;
mod cli_reference;
mod connection_offline;
mod docs_agree;
mod docs_inventory;
#[cfg(feature = "fake")]
mod fake_client;
#[cfg(feature = "fake")]
mod fake_sets;
mod selftest_cli;
mod stress_ledger;

/// The fake's tests, the model's differential test and the fake's example
/// need feature `fake` (`make test` turns it on): without it they are not
/// built, and this says so rather than let the suite pass without them.
#[cfg(not(feature = "fake"))]
#[test]
fn the_suite_runs_with_feature_fake() {
    panic!(
        "the fake's and the model's tests are left out: run the suite with `--features fake` (as `make test` does) \
         or `--all-features`"
    );
}
