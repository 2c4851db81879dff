//! The catalog queries, in the order they go to the server and their
//! answers are decoded. Each is one result set; parts that some engine lacks
//! are guarded with `IF` so that the whole batch still runs there (a failed
//! batch falls back to one round trip per query).
//!
//! Two batches: this database's catalog, then the queries that name msdb's
//! or master's (`msdb.sys.…`, `master.sys.…`). On Babelfish 4.2 a statement
//! naming another database's `sys` views moves the rest of its batch into
//! that database, even from an IF branch that does not run, so a query of
//! this database after it would read msdb's catalog instead; the next batch
//! starts in the connection's database again. The foreign keys and the
//! first batch's other answers name no other database.
//!
//! Each entry brings its own decoder, so the order here matters only where a
//! decoder builds on what an earlier one read: the logins, module texts,
//! signatures, numbered procedures, server triggers and key names join what
//! was read before them, and the signatures and the SECURITY DEFINER list
//! need the engine.

use super::query::Query;
use super::{
    background, beyond, database, foreign_keys, modules, objects, permissions, principals, proxies, server, trustworthy,
};

/// The batches, in the order they go to the server.
pub(super) fn batches() -> [Vec<Query>; 2] {
    [this_database(), other_databases()]
}

/// Every query, in the order their answers are decoded.
#[cfg(test)]
pub(super) fn queries() -> Vec<Query> {
    batches().into_iter().flatten().collect()
}

/// What names no other database's catalog.
fn this_database() -> Vec<Query> {
    vec![
        database::database_and_engine(),
        principals::visibility(),
        database::database_options(),
        principals::database_principals(),
        principals::user_logins(),
        principals::user_authentication(),
        principals::role_memberships(),
        permissions::database_permissions(),
        objects::schemas(),
        objects::objects(),
        objects::database_ddl_triggers(),
        objects::disabled_triggers(),
        modules::module_definitions(),
        modules::clr_modules(),
        modules::signatures(),
        objects::synonyms(),
        modules::references(),
        modules::deploy_journal(),
        server::server_roles_and_permissions(),
        server::server_configuration(),
        trustworthy::trustworthy_databases(),
        database::security_definer(),
        database::database_identity(),
        modules::numbered_procedures(),
        server::server_triggers(),
        objects::fence_table_features(),
        permissions::keys(),
        foreign_keys::foreign_keys(),
        server::linked_servers(),
        background::activated_queues(),
        beyond::table_expressions(),
        beyond::signing_keys(),
        beyond::assemblies(),
    ]
}

/// What names msdb's or master's catalog, in a batch of its own.
fn other_databases() -> Vec<Query> {
    vec![
        background::job_steps(),
        proxies::agent_proxies(),
        beyond::outside_tsql(),
    ]
}
