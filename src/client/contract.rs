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
    AssertHolder,
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
    Bit,
}

use Parameter as P;
use SqlType as T;

impl Procedure {
    pub(crate) const ALL: [Procedure; 9] = [
        Procedure::Provision,
        Procedure::Acquire,
        Procedure::Renew,
        Procedure::Publish,
        Procedure::Release,
        Procedure::GetOutcome,
        Procedure::ReadPublication,
        Procedure::Inspect,
        Procedure::AssertHolder,
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
            Procedure::AssertHolder => "fence_api.AssertHolder",
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
                (P::Release, T::Bit),
            ],
            Procedure::Release | Procedure::AssertHolder => &[
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
            T::Bit => "bit",
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
        T::Bit => name.eq_ignore_ascii_case("bit"),
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

    use crate::deploy::{Sources, tokenize};

    /// The rows the catalog query lists for the shipped
    /// `procedures/fence_api.*.sql`, read from their parameter lists.
    fn shipped_catalog() -> Vec<CatalogRow> {
        let sources = Sources::embedded().unwrap();
        let api = sources
            .procedures()
            .iter()
            .filter(|p| p.file().starts_with("fence_api."));
        api.flat_map(|p| declared_parameters(p.text())).collect()
    }

    /// Reads `CREATE PROCEDURE schema.Name @P type[(n|max)] [= default], ... AS`
    /// as `sys.all_parameters` and `sys.types` would list it.
    fn declared_parameters(text: &str) -> Vec<CatalogRow> {
        let code: Vec<&str> = tokenize(text)
            .iter()
            .filter(|t| !t.is_trivia())
            .map(|t| t.text)
            .collect();
        let unquoted = |w: &str| w.trim_matches(|c| matches!(c, '[' | ']' | '"')).to_string();
        let create = code.iter().position(|w| w.eq_ignore_ascii_case("CREATE")).unwrap();
        // CREATE PROCEDURE schema . Name
        let procedure = unquoted(code[create + 4]);
        let mut rows = Vec::new();
        let mut i = create + 5;
        while !code[i].eq_ignore_ascii_case("AS") {
            let (parameter, type_name) = (code[i], unquoted(code[i + 1]).to_lowercase());
            assert!(
                parameter.starts_with('@'),
                "{procedure}: expected a parameter, found {parameter}"
            );
            i += 2;
            // Bytes, as sys.all_parameters counts them; only nvarchar's matter here.
            let mut max_length = None;
            if code[i] == "(" {
                let per_char = if type_name.starts_with('n') { 2 } else { 1 };
                max_length = Some(match code[i + 1] {
                    max if max.eq_ignore_ascii_case("max") => -1,
                    chars => chars.parse::<i32>().unwrap() * per_char,
                });
                i += 3;
            }
            // A default or OUTPUT runs to the next comma or to AS.
            while code[i] != "," && !code[i].eq_ignore_ascii_case("AS") {
                i += 1;
            }
            i += usize::from(code[i] == ",");
            rows.push(CatalogRow {
                procedure: procedure.clone(),
                parameter: Some(parameter.to_string()),
                type_name: Some(type_name),
                max_length,
            });
        }
        rows
    }

    /// Names as Babelfish's catalog lists them: lower-cased.
    fn folded(rows: Vec<CatalogRow>) -> Vec<CatalogRow> {
        let lower = |s: Option<String>| s.map(|s| s.to_lowercase());
        rows.into_iter()
            .map(|r| CatalogRow {
                procedure: r.procedure.to_lowercase(),
                parameter: lower(r.parameter),
                ..r
            })
            .collect()
    }

    fn catalog() -> Vec<CatalogRow> {
        folded(shipped_catalog())
    }

    #[test]
    fn the_shipped_contract_has_no_differences_even_with_folded_names() {
        let shipped = shipped_catalog();
        assert_eq!(differences(&shipped), Vec::<String>::new());
        assert_eq!(differences(&folded(shipped)), Vec::<String>::new());
    }

    #[test]
    fn one_altered_shipped_parameter_is_a_difference() {
        let mut rows = shipped_catalog();
        let generation = rows
            .iter_mut()
            .find(|r| r.procedure == "Release" && r.parameter.as_deref() == Some("@Generation"))
            .unwrap();
        generation.type_name = Some("int".into());
        assert_eq!(
            differences(&rows),
            ["fence_api.Release declares @Generation as int, expected bigint"]
        );
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
            .find(|r| r.procedure == "renew" && r.parameter.as_deref() == Some("@generation"))
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
            "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @OperationId = @P4, @Payload = @P5, @Release = @P6"
        );
    }
}
