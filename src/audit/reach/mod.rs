//! The audit as a reachability question: which principals can write a fence
//! table, run a fence_admin procedure or change the shipped procedures, other
//! than through the shipped procedures and the grants a deploy makes.
//!
//! [`Graph::build`] turns a catalog into a graph whose nodes are database
//! principals, logins, server roles, modules and the three [`Goal`]s, and
//! whose edges are the ways one becomes another or reaches a goal, each with
//! its catalog evidence and the statement that removes it. Every right is
//! weighed by SQL Server's permission hierarchy, so a covering permission
//! (CONTROL, ALTER on the database, ALTER ANY SCHEMA) counts as what it
//! implies, and the fixed database roles hold their documented rights.
//! Server principals count with their server rights, and code that runs as
//! someone else (triggers, job steps, activation, EXECUTE AS) passes that
//! principal's reach to whoever may change what it calls.
//! [`closure`] answers, for one principal, the shortest path to each goal.

mod added;
mod as_caller;
mod availability_groups;
mod bits;
mod bound;
mod broken_chains;
mod build;
mod call_check;
mod call_walk;
mod callers;
mod cascades;
mod chained_callers;
mod closure;
mod code;
mod context_stack;
mod created_code;
mod cte_update;
mod database_owner;
mod denies;
mod deny_rows;
mod detours;
mod dml_targets;
mod drops;
mod edge;
mod expressions;
mod fixed_roles;
mod graph;
mod held;
mod leaving;
mod lending;
mod lending_calls;
mod lent_names;
mod lent_switch;
mod lent_targets;
mod lent_triggers;
mod lent_write;
mod login_alter;
mod mentions;
mod module_change;
mod node;
mod orphans;
mod principals;
mod proxies;
mod right;
mod rights;
mod row_writes;
mod run_time_sql;
mod runner;
mod runners;
mod server;
mod server_denies;
mod server_inherited;
mod server_rights;
mod signing;
mod signing_login;
mod singleton;
mod synonym_grants;
mod synonym_routes;
mod synonyms;
mod trigger_header;
mod trustworthy;
mod updatable;
mod writers;
mod written_through;

pub(crate) use closure::{Reached, shortest, trusted_as};
pub(crate) use denies::grant_survives;
pub(crate) use drops::Drops;
pub(crate) use edge::Kind;
pub(crate) use graph::Graph;
pub(crate) use node::{Goal, Node};
