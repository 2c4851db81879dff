//! The procedure contract this client speaks: each `fence_api` procedure with
//! its parameters, the one statement used to call it, and the start-up check
//! that the database holds them.

use super::error::{Error, Parameter};

/// The version of the procedure contract this client speaks.
pub const CONTRACT_VERSION: u32 = 1;

/// A `fence_api` procedure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Procedure {
    Provision,
    Acquire,
    Renew,
    Publish,
    Release,
    GetOutcome,
    ReadPublication,
    Inspect,
}

/// A parameter's declared type as the catalog names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SqlType {
    /// `nvarchar` wide enough to hold a 257-character key, so an over-long key
    /// reaches the procedure's check instead of being truncated to fit.
    WideKey,
    /// `nvarchar(max)`.
    NVarCharMax,
    UniqueIdentifier,
    Int,
    BigInt,
}

use Parameter as P;
use SqlType as T;

impl Procedure {
    pub(crate) const ALL: [Procedure; 8] = [
        Procedure::Provision,
        Procedure::Acquire,
        Procedure::Renew,
        Procedure::Publish,
        Procedure::Release,
        Procedure::GetOutcome,
        Procedure::ReadPublication,
        Procedure::Inspect,
    ];

    /// The schema-qualified name, as used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Procedure::Provision => "fence_api.Provision",
            Procedure::Acquire => "fence_api.Acquire",
            Procedure::Renew => "fence_api.Renew",
            Procedure::Publish => "fence_api.Publish",
            Procedure::Release => "fence_api.Release",
            Procedure::GetOutcome => "fence_api.GetOutcome",
            Procedure::ReadPublication => "fence_api.ReadPublication",
            Procedure::Inspect => "fence_api.Inspect",
        }
    }

    fn parameters(self) -> &'static [(Parameter, SqlType)] {
        match self {
            Procedure::Provision | Procedure::ReadPublication | Procedure::Inspect => &[(P::ResourceKey, T::WideKey)],
            Procedure::Acquire => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::LeaseSeconds, T::Int),
            ],
            Procedure::Renew => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
                (P::LeaseSeconds, T::Int),
            ],
            Procedure::Publish => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
                (P::OperationId, T::UniqueIdentifier),
                (P::Payload, T::NVarCharMax),
            ],
            Procedure::Release => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
            ],
            Procedure::GetOutcome => &[(P::OperationId, T::UniqueIdentifier)],
        }
    }

    /// The one statement that calls the procedure, its arguments bound in
    /// contract order as `@P1, @P2, ...`. Arguments are passed by name so a
    /// contract version that appends optional parameters still works.
    pub(crate) fn statement(self) -> String {
        let arguments: Vec<String> = self
            .parameters()
            .iter()
            .enumerate()
            .map(|(i, (parameter, _))| format!("{} = @P{}", parameter.name(), i + 1))
            .collect();
        format!("EXEC {} {}", self.name(), arguments.join(", "))
    }
}

/// Lists every `fence_api` procedure with its parameters, one row per parameter.
/// `sys.all_parameters` rather than `sys.parameters`: both hold user procedures'
/// parameters on SQL Server, and only the former exists on Babelfish.
pub(crate) const CATALOG_QUERY: &str = "\
SELECT p.name AS ProcedureName, prm.name AS ParameterName, t.name AS TypeName, \
       CAST(prm.max_length AS int) AS MaxLength \
  FROM sys.procedures AS p \
  JOIN sys.schemas AS s ON s.schema_id = p.schema_id \
  LEFT JOIN sys.all_parameters AS prm ON prm.object_id = p.object_id \
  LEFT JOIN sys.types AS t ON t.user_type_id = prm.user_type_id \
 WHERE s.name = N'fence_api' \
 ORDER BY p.name, prm.parameter_id";

/// One row of [`CATALOG_QUERY`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CatalogRow {
    pub procedure: String,
    pub parameter: Option<String>,
    pub type_name: Option<String>,
    /// Bytes; -1 for `max`.
    pub max_length: Option<i32>,
}

/// Compares the catalog with the contract and names every difference.
/// Names compare without regard to case: the catalog of some engines folds them.
pub(crate) fn differences(catalog: &[CatalogRow]) -> Vec<String> {
    let mut problems = Vec::new();
    for procedure in Procedure::ALL {
        let short = &procedure.name()["fence_api.".len()..];
        let rows: Vec<&CatalogRow> = catalog
            .iter()
            .filter(|r| r.procedure.eq_ignore_ascii_case(short))
            .collect();
        if rows.is_empty() {
            problems.push(format!("{} is missing", procedure.name()));
            continue;
        }
        let declared: Vec<&CatalogRow> = rows.iter().copied().filter(|r| r.parameter.is_some()).collect();
        for (parameter, expected) in procedure.parameters() {
            let found = declared.iter().find(|r| {
                r.parameter.as_deref().is_some_and(|name| {
                    name.trim_start_matches('@')
                        .eq_ignore_ascii_case(&parameter.name()[1..])
                })
            });
            match found {
                None => problems.push(format!("{} has no parameter {parameter}", procedure.name())),
                Some(row) if !matches_type(*expected, row) => problems.push(format!(
                    "{} declares {parameter} as {}, expected {}",
                    procedure.name(),
                    describe(row),
                    expected.describe()
                )),
                Some(_) => {}
            }
        }
        for row in &declared {
            let name = row.parameter.as_deref().unwrap_or_default();
            let known = procedure
                .parameters()
                .iter()
                .any(|(p, _)| name.trim_start_matches('@').eq_ignore_ascii_case(&p.name()[1..]));
            if !known {
                problems.push(format!(
                    "{} has a parameter {name} this client does not pass",
                    procedure.name()
                ));
            }
        }
    }
    problems
}

impl SqlType {
    fn describe(self) -> &'static str {
        match self {
            T::WideKey => "nvarchar wider than 256 characters",
            T::NVarCharMax => "nvarchar(max)",
            T::UniqueIdentifier => "uniqueidentifier",
            T::Int => "int",
            T::BigInt => "bigint",
        }
    }
}

fn matches_type(expected: SqlType, row: &CatalogRow) -> bool {
    let name = row.type_name.as_deref().unwrap_or_default();
    let length = row.max_length.unwrap_or(0);
    match expected {
        // nvarchar lengths are in bytes, two per character.
        T::WideKey => name.eq_ignore_ascii_case("nvarchar") && (length == -1 || length >= 2 * 257),
        T::NVarCharMax => name.eq_ignore_ascii_case("nvarchar") && length == -1,
        T::UniqueIdentifier => name.eq_ignore_ascii_case("uniqueidentifier"),
        T::Int => name.eq_ignore_ascii_case("int"),
        T::BigInt => name.eq_ignore_ascii_case("bigint"),
    }
}

fn describe(row: &CatalogRow) -> String {
    let name = row.type_name.as_deref().unwrap_or("an unknown type");
    match row.max_length {
        Some(-1) if name.eq_ignore_ascii_case("nvarchar") => format!("{name}(max)"),
        Some(bytes) if name.eq_ignore_ascii_case("nvarchar") => format!("{name}({})", bytes / 2),
        _ => name.to_string(),
    }
}

impl From<Vec<String>> for Error {
    fn from(problems: Vec<String>) -> Self {
        Error::ContractMismatch {
            version: CONTRACT_VERSION,
            problems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Vec<CatalogRow> {
        let mut rows = Vec::new();
        for procedure in Procedure::ALL {
            for (parameter, ty) in procedure.parameters() {
                let (type_name, max_length) = match ty {
                    T::WideKey => ("nvarchar", 8000),
                    T::NVarCharMax => ("nvarchar", -1),
                    T::UniqueIdentifier => ("uniqueidentifier", 16),
                    T::Int => ("int", 4),
                    T::BigInt => ("bigint", 8),
                };
                rows.push(CatalogRow {
                    procedure: procedure.name()["fence_api.".len()..].to_lowercase(),
                    parameter: Some(parameter.name().to_string()),
                    type_name: Some(type_name.into()),
                    max_length: Some(max_length),
                });
            }
        }
        rows
    }

    #[test]
    fn the_shipped_contract_has_no_differences_even_with_folded_names() {
        assert_eq!(differences(&catalog()), Vec::<String>::new());
    }

    #[test]
    fn a_missing_procedure_is_named() {
        let rows: Vec<_> = catalog().into_iter().filter(|r| r.procedure != "getoutcome").collect();
        assert_eq!(differences(&rows), ["fence_api.GetOutcome is missing"]);
    }

    #[test]
    fn a_key_declared_256_wide_is_reported_because_it_would_truncate() {
        let mut rows = catalog();
        let key = rows.iter_mut().find(|r| r.procedure == "acquire").unwrap();
        key.max_length = Some(512);
        assert_eq!(
            differences(&rows),
            ["fence_api.Acquire declares @ResourceKey as nvarchar(256), expected nvarchar wider than 256 characters"]
        );
    }

    #[test]
    fn missing_and_unexpected_parameters_are_both_named() {
        let mut rows = catalog();
        let generation = rows
            .iter_mut()
            .find(|r| r.procedure == "renew" && r.parameter.as_deref() == Some("@Generation"))
            .unwrap();
        generation.parameter = Some("@Gen".into());
        assert_eq!(
            differences(&rows),
            [
                "fence_api.Renew has no parameter @Generation",
                "fence_api.Renew has a parameter @Gen this client does not pass"
            ]
        );
    }

    #[test]
    fn each_statement_binds_the_parameters_by_name_in_order() {
        assert_eq!(
            Procedure::Publish.statement(),
            "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @OperationId = @P4, @Payload = @P5"
        );
    }
}
