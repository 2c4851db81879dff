//! The catalog queries, in the order they go to the server and their
//! answers are decoded. Each is one result set; parts that some engine lacks
//! are guarded with `IF` so that the whole batch still runs there (a failed
//! batch falls back to one round trip per query).
//!
//! Each entry brings its own decoder, so the order here matters only where a
//! decoder builds on what an earlier one read: the logins, module texts,
//! signatures, numbered procedures, server triggers and key names join what
//! was read before them, and the signatures and the SECURITY DEFINER list
//! need the engine; and the foreign keys come before the first query that
//! names another database's catalog, which on Babelfish moves the rest of
//! the batch into that database.

use super::query::Query;
use super::{
    background, beyond, database, foreign_keys, modules, objects, permissions, principals, proxies, server, trustworthy,
};

pub(super) fn queries() -> Vec<Query> {
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
        // Before the first query naming another database's catalog: on
        // Babelfish 4.2 a statement naming `msdb.sys.…` or `master.sys.…`,
        // even in a branch it does not take, moves the rest of the batch
        // into that database.
        foreign_keys::foreign_keys(),
        background::job_steps(),
        proxies::agent_proxies(),
        server::linked_servers(),
        background::activated_queues(),
        beyond::table_expressions(),
        beyond::signing_keys(),
        beyond::assemblies(),
        beyond::outside_tsql(),
    ]
}
