//! The schemas and the objects in them: tables, modules, database DDL
//! triggers and synonyms, and what acts on the fence tables' rows.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{FenceTableFeature, Object, ObjectKind, Schema, TableFeature};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

pub(super) fn schemas() -> Query {
    Query::required(
        "schemas",
        "SELECT CAST(s.name AS nvarchar(256)), CAST(USER_NAME(s.principal_id) AS nvarchar(256)) FROM sys.schemas AS s",
        read_schemas,
    )
}

fn read_schemas(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        reading.catalog.schemas.push(Schema {
            name: required(row, 0, what)?,
            owner: text(row, 1, what)?.unwrap_or_default(),
        });
    }
    Ok(())
}

/// Objects and module texts are read apart and joined here by id: on
/// Babelfish each catalog view is costly per row, and joining the two in SQL
/// costs more than reading both. CLR modules (PC, FS, FT, TA, AF) are listed
/// with the T-SQL ones; their code is in no view.
pub(super) fn objects() -> Query {
    Query::required(
        "objects",
        "SELECT o.object_id, CAST(SCHEMA_NAME(o.schema_id) AS nvarchar(256)), CAST(o.name AS nvarchar(256)),
                    CAST(o.type AS nvarchar(2)),
                    -- Babelfish answers USER_NAME(NULL) with the current user;
                    -- a NULL owner means the schema's.
                    CAST(CASE WHEN o.principal_id IS NOT NULL THEN USER_NAME(o.principal_id) END AS nvarchar(256)),
                    CAST(CASE WHEN o.parent_object_id <> 0
                              THEN OBJECT_SCHEMA_NAME(o.parent_object_id) + N'.' + OBJECT_NAME(o.parent_object_id)
                         END AS nvarchar(520))
               FROM sys.objects AS o
              WHERE o.is_ms_shipped = 0
                AND o.type IN ('U', 'P', 'V', 'FN', 'IF', 'TF', 'TR', 'PC', 'FS', 'FT', 'TA', 'AF')",
        read_objects,
    )
}

fn read_objects(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let kind = match text(row, 3, what)?.as_deref().map(str::trim) {
            Some("U") => ObjectKind::Table,
            Some("P" | "PC") => ObjectKind::Procedure,
            Some("V") => ObjectKind::View,
            Some("TR" | "TA") => ObjectKind::Trigger,
            _ => ObjectKind::Function,
        };
        if let Some(id) = int(row, 0, what)? {
            reading.object_at.insert(id, reading.catalog.objects.len());
        }
        let mut object = object(required(row, 1, what)?, required(row, 2, what)?, kind);
        object.owner = text(row, 4, what)?;
        object.parent = text(row, 5, what)?;
        reading.catalog.objects.push(object);
    }
    Ok(())
}

/// Database DDL triggers belong to no schema and are not in sys.objects;
/// their texts are in sys.sql_modules, read with the other modules'.
pub(super) fn database_ddl_triggers() -> Query {
    Query::optional(
        "database DDL triggers",
        "SELECT t.object_id, CAST(t.name AS nvarchar(256)) FROM sys.triggers AS t WHERE t.parent_class = 0",
        read_database_ddl_triggers,
    )
}

fn read_database_ddl_triggers(
    rows: Option<&[Row]>,
    what: &'static str,
    reading: &mut Reading,
) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        if let Some(id) = int(row, 0, what)? {
            reading.object_at.insert(id, reading.catalog.objects.len());
        }
        reading.catalog.objects.push(object(
            String::new(),
            required(row, 1, what)?,
            ObjectKind::DatabaseTrigger,
        ));
    }
    Ok(())
}

/// Disabled DML triggers: they do not fire until enabled.
pub(super) fn disabled_triggers() -> Query {
    Query::optional(
        "disabled triggers",
        "SELECT t.object_id FROM sys.triggers AS t WHERE t.parent_class = 1 AND t.is_disabled = 1",
        read_disabled_triggers,
    )
}

fn read_disabled_triggers(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        if let Some(at) = int(row, 0, what)?.and_then(|id| reading.object_at.get(&id).copied()) {
            reading.catalog.objects[at].disabled = true;
        }
    }
    Ok(())
}

pub(super) fn synonyms() -> Query {
    Query::optional(
        "synonyms",
        "SELECT CAST(SCHEMA_NAME(s.schema_id) AS nvarchar(256)), CAST(s.name AS nvarchar(256)),
                    CAST(CASE WHEN s.principal_id IS NOT NULL THEN USER_NAME(s.principal_id) END AS nvarchar(256)),
                    CAST(s.base_object_name AS nvarchar(1035))
               FROM sys.synonyms AS s",
        read_synonyms,
    )
}

fn read_synonyms(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let mut synonym = object(required(row, 0, what)?, required(row, 1, what)?, ObjectKind::Synonym);
        synonym.owner = text(row, 2, what)?;
        synonym.definition = text(row, 3, what)?;
        reading.catalog.objects.push(synonym);
    }
    Ok(())
}

/// History tables, change data capture, replication and security policies
/// on the fence tables; a marker row where the engine has no
/// sys.security_predicates (Babelfish), where they cannot be ruled out.
const FENCE_TABLE_FEATURES: &str = "IF OBJECT_ID(N'sys.security_predicates') IS NULL
         SELECT CAST(N'no catalog' AS nvarchar(16)), CAST(NULL AS nvarchar(520)), CAST(NULL AS nvarchar(520))
     ELSE
         SELECT CAST(N'versioned' AS nvarchar(16)),
                CAST(SCHEMA_NAME(t.schema_id) + N'.' + t.name AS nvarchar(520)),
                CAST(OBJECT_SCHEMA_NAME(t.history_table_id) + N'.' + OBJECT_NAME(t.history_table_id) AS nvarchar(520))
           FROM sys.tables AS t WHERE SCHEMA_NAME(t.schema_id) = N'fence' AND t.temporal_type = 2
         UNION ALL
         SELECT N'cdc', CAST(SCHEMA_NAME(t.schema_id) + N'.' + t.name AS nvarchar(520)), NULL
           FROM sys.tables AS t WHERE SCHEMA_NAME(t.schema_id) = N'fence' AND t.is_tracked_by_cdc = 1
         UNION ALL
         SELECT N'replicated', CAST(SCHEMA_NAME(t.schema_id) + N'.' + t.name AS nvarchar(520)), NULL
           FROM sys.tables AS t WHERE SCHEMA_NAME(t.schema_id) = N'fence'
            AND (t.is_replicated = 1 OR t.is_merge_published = 1 OR t.is_published = 1)
         UNION ALL
         SELECT N'policy', CAST(OBJECT_SCHEMA_NAME(sp.target_object_id) + N'.' + OBJECT_NAME(sp.target_object_id)
                                AS nvarchar(520)),
                CAST(OBJECT_SCHEMA_NAME(sp.object_id) + N'.' + OBJECT_NAME(sp.object_id) AS nvarchar(520))
           FROM sys.security_predicates AS sp WHERE OBJECT_SCHEMA_NAME(sp.target_object_id) = N'fence'";

pub(super) fn fence_table_features() -> Query {
    Query::optional(
        "what acts on the fence tables' rows",
        FENCE_TABLE_FEATURES,
        read_fence_table_features,
    )
}

fn read_fence_table_features(
    rows: Option<&[Row]>,
    what: &'static str,
    reading: &mut Reading,
) -> Result<(), AuditError> {
    reading.catalog.fence_table_features = match rows {
        Some(rows) => features(rows, what)?,
        None => None,
    };
    Ok(())
}

/// The features on the fence tables, or `None` at the marker row of an
/// engine without the catalog to show them.
fn features(rows: &[Row], what: &'static str) -> Result<Option<Vec<FenceTableFeature>>, AuditError> {
    let mut features = Vec::new();
    for row in rows {
        let table = text(row, 1, what)?.unwrap_or_default();
        let other = text(row, 2, what)?.unwrap_or_default();
        let feature = match text(row, 0, what)?.as_deref() {
            Some("versioned") => TableFeature::SystemVersioned { history: other },
            Some("cdc") => TableFeature::ChangeDataCapture,
            Some("replicated") => TableFeature::Replicated,
            Some("policy") => TableFeature::SecurityPolicy { policy: other },
            _ => return Ok(None),
        };
        features.push(FenceTableFeature { table, feature });
    }
    Ok(Some(features))
}

/// An object as its row names it, before the module queries fill in its
/// text, execution context, signatures and assembly.
pub(super) fn object(schema: String, name: String, kind: ObjectKind) -> Object {
    Object {
        schema,
        name,
        kind,
        owner: None,
        parent: None,
        definition: None,
        definition_hash: None,
        execute_as: None,
        execute_as_user: false,
        signed_by: Vec::new(),
        counter_signed_by: Vec::new(),
        assembly: None,
        disabled: false,
    }
}
