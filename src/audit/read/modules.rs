//! What the modules hold, joined to the objects already read by object id:
//! their texts and execution context, CLR assemblies, signatures, numbered
//! procedures; and what refers to the fence schemas, and the deploy journal
//! the shipped procedures' texts are compared with.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{Dependency, DeployedProcedure, ObjectKind};
use super::objects::object;
use super::query::{Query, Reading};
use super::rows::{int, required, text};
use crate::tsql::definition_hash_sql;

/// Hashing is limited to the code schemas: only shipped procedures are
/// compared with the deploy journal.
pub(super) fn module_definitions() -> Query {
    let sql = format!(
        "SELECT m.object_id, CAST(m.definition AS nvarchar(max)),
                        -- NULL is EXECUTE AS CALLER (and USER_NAME(NULL) the current user on Babelfish).
                        CAST(CASE WHEN m.execute_as_principal_id IS NULL THEN NULL
                                  WHEN m.execute_as_principal_id = -2 THEN N'OWNER'
                                  ELSE USER_NAME(m.execute_as_principal_id) END AS nvarchar(256)),
                        CASE WHEN OBJECT_SCHEMA_NAME(m.object_id) IN (N'fence_api', N'fence_admin') THEN {} END,
                        -- A principal's id, which a user called Owner has too: only -2 is the keyword.
                        CAST(m.execute_as_principal_id AS int)
                   FROM sys.sql_modules AS m",
        definition_hash_sql("m.definition")
    );
    Query::required("module definitions", sql, read_module_definitions)
}

fn read_module_definitions(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let Some(&at) = int(row, 0, what)?.and_then(|id| reading.object_at.get(&id)) else {
            continue;
        };
        let object = &mut reading.catalog.objects[at];
        object.definition = text(row, 1, what)?;
        object.execute_as = text(row, 2, what)?;
        object.execute_as_user = int(row, 4, what)?.is_some_and(|id| id != -2);
        object.definition_hash = crate::tsql::hash_hex(row, 3);
    }
    Ok(())
}

/// Only names the assembly of CLR modules sys.objects already listed:
/// without any, the two views are not worth a fresh session's planning.
pub(super) fn clr_modules() -> Query {
    Query::optional(
        "CLR modules",
        "IF EXISTS (SELECT 1 FROM sys.objects AS o WHERE o.type IN ('PC', 'FS', 'FT', 'TA', 'AF'))
                 SELECT am.object_id, CAST(a.name + N' (' + a.permission_set_desc + N')' AS nvarchar(300))
                   FROM sys.assembly_modules AS am JOIN sys.assemblies AS a ON a.assembly_id = am.assembly_id
             ELSE
                 SELECT CAST(NULL AS int), CAST(NULL AS nvarchar(300)) WHERE 1 = 0",
        read_clr_modules,
    )
}

fn read_clr_modules(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        if let Some(&at) = int(row, 0, what)?.and_then(|id| reading.object_at.get(&id)) {
            reading.catalog.objects[at].assembly = text(row, 1, what)?;
        }
    }
    Ok(())
}

/// Signatures on modules, a countersignature (crypt_type CPVC or CPVA)
/// marked `COUNTER `. An engine without `sys.crypt_properties` can still
/// prove no module is signed: signing needs a certificate or an asymmetric
/// key, and then it has none.
const SIGNATURES: &str = "IF OBJECT_ID(N'sys.crypt_properties') IS NULL
         SELECT CAST(NULL AS int), CAST(CASE WHEN EXISTS (SELECT 1 FROM sys.certificates)
                                               OR EXISTS (SELECT 1 FROM sys.asymmetric_keys)
                                             THEN N'signers' ELSE N'no signers' END AS nvarchar(300))
     ELSE
         SELECT cp.major_id,
                CAST(CASE WHEN cp.crypt_type LIKE N'C%' THEN N'COUNTER ' ELSE N'' END
                     + CASE WHEN c.name IS NOT NULL THEN N'CERTIFICATE::' + c.name
                          WHEN k.name IS NOT NULL THEN N'ASYMMETRIC KEY::' + k.name
                          ELSE N'an unknown signer' END AS nvarchar(300))
           FROM sys.crypt_properties AS cp
           LEFT JOIN sys.certificates AS c ON c.thumbprint = cp.thumbprint
           LEFT JOIN sys.asymmetric_keys AS k ON k.thumbprint = cp.thumbprint
          WHERE cp.class = 1";

pub(super) fn signatures() -> Query {
    Query::optional("module signatures", SIGNATURES, read_signatures)
}

fn read_signatures(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    let catalog = &mut reading.catalog;
    match rows {
        None => {
            catalog.signatures_unreadable = Some("module signatures (sys.crypt_properties) could not be read".into())
        }
        Some(rows) => {
            for row in rows {
                let signer = required(row, 1, what)?;
                match int(row, 0, what)? {
                    Some(id) => {
                        if let Some(&at) = reading.object_at.get(&id) {
                            let o = &mut catalog.objects[at];
                            match signer.strip_prefix("COUNTER ") {
                                Some(key) => o.counter_signed_by.push(key.to_string()),
                                None => o.signed_by.push(signer),
                            }
                        }
                    }
                    None if signer == "signers" => {
                        catalog.signatures_unreadable = Some(format!(
                            "{} has certificates or asymmetric keys but no signature catalog \
                             (sys.crypt_properties)",
                            catalog.engine.product
                        ));
                    }
                    None => {}
                }
            }
        }
    }
    Ok(())
}

/// References to the fence tables and to the shipped procedures.
pub(super) fn references() -> Query {
    Query::optional(
        "references to the fence schemas",
        "SELECT CAST(OBJECT_SCHEMA_NAME(d.referencing_id) + N'.' + OBJECT_NAME(d.referencing_id) AS nvarchar(520)),
                    CAST(COALESCE(d.referenced_schema_name, OBJECT_SCHEMA_NAME(d.referenced_id)) + N'.'
                         + d.referenced_entity_name AS nvarchar(520))
               FROM sys.sql_expression_dependencies AS d
              WHERE d.referenced_schema_name IN (N'fence', N'fence_api', N'fence_admin')
                 OR OBJECT_SCHEMA_NAME(d.referenced_id) IN (N'fence', N'fence_api', N'fence_admin')",
        read_references,
    )
}

fn read_references(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.dependencies = match rows {
        None => None,
        Some(rows) => Some(
            rows.iter()
                .map(|row| {
                    Ok(Dependency {
                        referencing: required(row, 0, what)?,
                        referenced: required(row, 1, what)?,
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
    };
    Ok(())
}

/// A marker row tells "no journal table" from "an empty journal".
pub(super) fn deploy_journal() -> Query {
    Query::optional(
        "the deploy journal",
        "IF OBJECT_ID(N'fence.DeployedProcedure', N'U') IS NULL
                 SELECT CAST(0 AS int), CAST(NULL AS nvarchar(256)), CAST(NULL AS varbinary(32))
             ELSE
                 SELECT CAST(1 AS int), CAST(ProcedureName AS nvarchar(256)), CAST(DefinitionHash AS varbinary(32))
                   FROM fence.DeployedProcedure",
        read_deploy_journal,
    )
}

fn read_deploy_journal(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.deployed = match rows {
        Some(rows) if rows.iter().all(|r| matches!(int(r, 0, what), Ok(Some(1)))) => Some(
            rows.iter()
                .map(|row| {
                    Ok(DeployedProcedure {
                        name: required(row, 1, what)?,
                        definition_hash: crate::tsql::hash_hex(row, 2),
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
        _ => None,
    };
    Ok(())
}

/// The bodies of numbered procedures beyond the first. `Acquire;2` shares
/// Acquire's grants and ownership chain, and its text is in no other view.
const NUMBERED: &str = "IF OBJECT_ID(N'sys.numbered_procedures') IS NULL
         SELECT CAST(NULL AS int), CAST(NULL AS int), CAST(NULL AS nvarchar(max)) WHERE 1 = 0
     ELSE
         SELECT n.object_id, CAST(n.procedure_number AS int), CAST(n.definition AS nvarchar(max))
           FROM sys.numbered_procedures AS n WHERE n.procedure_number > 1";

pub(super) fn numbered_procedures() -> Query {
    Query::optional("numbered procedures", NUMBERED, read_numbered_procedures)
}

fn read_numbered_procedures(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let (Some(id), Some(number)) = (int(row, 0, what)?, int(row, 1, what)?) else {
            continue;
        };
        let Some(&at) = reading.object_at.get(&id) else {
            continue;
        };
        let base = &reading.catalog.objects[at];
        let mut numbered = object(
            base.schema.clone(),
            format!("{};{number}", base.name),
            ObjectKind::Procedure,
        );
        numbered.owner = base.owner.clone();
        numbered.definition = text(row, 2, what)?;
        reading.catalog.objects.push(numbered);
    }
    Ok(())
}
