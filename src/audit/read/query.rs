//! One catalog query declared together with the decoder of its answer, and
//! the snapshot the decoders fill in. A query and its decoder are one value,
//! so neither can be added, removed or moved without the other.

use std::collections::HashMap;

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::Catalog;

/// Reads one query's answer into the snapshot. The rows are `None` when an
/// optional query failed on this engine; `what` names the query in errors.
pub(super) type Read = fn(Option<&[Row]>, &'static str, &mut Reading) -> Result<(), AuditError>;

/// One catalog query and its decoder. Optional ones read views some engines
/// lack; their absence becomes "cannot verify" for the rules that need them.
pub(super) struct Query {
    /// What the query reads, as errors name it (`database principals`).
    pub(super) what: &'static str,
    pub(super) sql: String,
    /// Whether the catalog cannot be read at all without this answer.
    pub(super) required: bool,
    pub(super) read: Read,
}

impl Query {
    /// A query whose failure fails the whole reading.
    pub(super) fn required(what: &'static str, sql: impl Into<String>, read: Read) -> Self {
        Query {
            what,
            sql: sql.into(),
            required: true,
            read,
        }
    }

    /// A query an engine may fail, leaving its part of the snapshot unknown.
    pub(super) fn optional(what: &'static str, sql: impl Into<String>, read: Read) -> Self {
        Query {
            what,
            sql: sql.into(),
            required: false,
            read,
        }
    }
}

/// The catalog as the decoders fill it in. Objects are read once and the
/// module texts, assemblies, signatures and numbered procedures read after
/// them are joined to them by object id, through `object_at`.
#[derive(Default)]
pub(super) struct Reading {
    pub(super) catalog: Catalog,
    /// Where each object read so far sits in `catalog.objects`, by object id.
    pub(super) object_at: HashMap<i32, usize>,
}
