//! The procedure contract this client speaks: each `fence_api` procedure with
//! its parameters, the one statement used to call it, and the start-up check
//! that the database holds them.

use super::error::{Error, Parameter};

/// The version of the procedure contract this client speaks, and the oldest
/// one it accepts: a database answering the same major and this minor or a
/// later one (`fence_api.ContractVersion`) holds everything it calls.
///
/// v1.2 added `fence_api.ContractVersion` and `ServerUtc` on `fence_api.Acquire`'s
/// row, which [`acquire_waiting`](super::Client::acquire_waiting) times its pauses by.
/// v1.3 added the operators' tenure history and recovery (`fence_admin`),
/// which `fencepost lease history | prune | recover` call; the client and
/// the procedures it deploys are released together, so it asks for v1.3.
pub const CONTRACT_VERSION: ContractVersion = ContractVersion { major: 1, minor: 4 };

/// A procedure contract version, as `fence_api.ContractVersion` answers it.
/// Minors add (columns, outcomes, optional parameters, procedures); a major
/// changes meaning. Shown as `v1.1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContractVersion {
    /// Changes of meaning.
    pub major: u32,
    /// Compatible additions.
    pub minor: u32,
}

impl std::fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl ContractVersion {
    /// Whether a database answering `self` holds what a client speaking
    /// `needed` calls: the same major, and a minor at least as new.
    pub fn satisfies(self, needed: ContractVersion) -> bool {
        self.major == needed.major && self.minor >= needed.minor
    }
}

/// The version in `fence_api.ContractVersion`'s one row.
pub(crate) fn read_version(rows: &[tiberius::Row]) -> Option<ContractVersion> {
    let [row] = rows else { return None };
    let column = |name: &str| {
        let index = row.columns().iter().position(|c| c.name().eq_ignore_ascii_case(name))?;
        row.try_get::<i32, _>(index).ok().flatten()
    };
    let outcome_index = row
        .columns()
        .iter()
        .position(|c| c.name().eq_ignore_ascii_case("Outcome"))?;
    if row.try_get::<&str, _>(outcome_index).ok().flatten() != Some("Version") {
        return None;
    }
    Some(ContractVersion {
        major: u32::try_from(column("Major")?).ok()?,
        minor: u32::try_from(column("Minor")?).ok()?,
    })
}

/// Why the deployed version does not do for this client, or `None` when it does.
pub(crate) fn version_problem(deployed: ContractVersion) -> Option<String> {
    if deployed.satisfies(CONTRACT_VERSION) {
        return None;
    }
    let why = if deployed.major != CONTRACT_VERSION.major {
        "a different major version"
    } else {
        "an older minor version"
    };
    Some(format!(
        "the database speaks contract {deployed}, this client needs {CONTRACT_VERSION} ({why})"
    ))
}

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
    ContractVersion,
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
    pub(crate) const ALL: [Procedure; 10] = [
        Procedure::Provision,
        Procedure::Acquire,
        Procedure::Renew,
        Procedure::Publish,
        Procedure::Release,
        Procedure::GetOutcome,
        Procedure::ReadPublication,
        Procedure::Inspect,
        Procedure::AssertHolder,
        Procedure::ContractVersion,
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
            Procedure::ContractVersion => "fence_api.ContractVersion",
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
                (P::SourceVersion, T::BigInt),
            ],
            Procedure::Release => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
            ],
            Procedure::AssertHolder => &[
                (P::ResourceKey, T::WideKey),
                (P::Owner, T::UniqueIdentifier),
                (P::Generation, T::BigInt),
                (P::SourceVersion, T::BigInt),
            ],
            Procedure::GetOutcome => &[(P::OperationId, T::UniqueIdentifier)],
            Procedure::ContractVersion => &[],
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

/// The deployed contract version, when the procedure that answers it exists
/// (a database older than the procedure gets a "missing" from the catalog
/// check instead of a failed batch).
pub(crate) const VERSION_QUERY: &str = "\
IF OBJECT_ID(N'fence_api.ContractVersion', N'P') IS NOT NULL EXEC fence_api.ContractVersion";

/// The text of every `fence_api` procedure, NULL where the login may not read
/// it: only the text says whether an extra parameter has a default
/// (`has_default_value` is 0 for T-SQL procedures on SQL Server and on Babelfish).
pub(crate) const DEFINITION_QUERY: &str = "\
SELECT p.name AS ProcedureName, CAST(m.definition AS nvarchar(max)) AS Definition \
  FROM sys.procedures AS p \
  JOIN sys.schemas AS s ON s.schema_id = p.schema_id \
  LEFT JOIN sys.sql_modules AS m ON m.object_id = p.object_id \
 WHERE s.name = N'fence_api'";

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
/// `definitions` holds each procedure's text (None where unreadable), read
/// only to tell an appended optional parameter, a compatible change, from one
/// every call would have to pass.
pub(crate) fn differences(catalog: &[CatalogRow], definitions: &[(String, Option<String>)]) -> Differences {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
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
            if known {
                continue;
            }
            let text = definitions
                .iter()
                .find(|(p, _)| p.eq_ignore_ascii_case(short))
                .and_then(|(_, text)| text.as_deref());
            match text.map(|text| has_default(text, name)) {
                Some(false) => problems.push(format!(
                    "{} has a parameter {name} without a default, which this client does not pass",
                    procedure.name()
                )),
                Some(true) => warnings.push(format!(
                    "{} has an optional parameter {name} this client does not pass (a later contract's addition)",
                    procedure.name()
                )),
                None => warnings.push(format!(
                    "{} has a parameter {name} this client does not pass; the contract makes added parameters \
                     optional, and the login may not read the definition to confirm it",
                    procedure.name()
                )),
            }
        }
    }
    Differences { problems, warnings }
}

/// What [`differences`] found: `problems` refuse the contract, `warnings`
/// are compatible changes worth a log line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Differences {
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

/// Whether `parameter` is declared with a default in a procedure's `text`:
/// an `=` between its name and the next parameter or the `AS` that ends the
/// list. Not found reads as no default.
pub(crate) fn has_default(text: &str, parameter: &str) -> bool {
    let code: Vec<&str> = crate::tsql::tokenize(text)
        .iter()
        .filter(|t| !t.is_trivia())
        .map(|t| t.text)
        .collect();
    let Some(start) = code.iter().position(|w| w.eq_ignore_ascii_case(parameter)) else {
        return false;
    };
    let mut depth = 0usize;
    for word in &code[start + 1..] {
        match *word {
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            "," if depth == 0 => return false,
            "=" if depth == 0 => return true,
            w if depth == 0 && (w.eq_ignore_ascii_case("AS") || w.starts_with('@')) => return false,
            _ => {}
        }
    }
    false
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

    use crate::deploy::Sources;
    use crate::tsql::tokenize;

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
        if rows.is_empty() {
            // The catalog's LEFT JOIN lists a procedure without parameters once.
            rows.push(CatalogRow {
                procedure,
                parameter: None,
                type_name: None,
                max_length: None,
            });
        }
        rows
    }

    fn problems(rows: &[CatalogRow]) -> Vec<String> {
        differences(rows, &[]).problems
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
        assert_eq!(problems(&shipped), Vec::<String>::new());
        assert_eq!(problems(&folded(shipped)), Vec::<String>::new());
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
            problems(&rows),
            ["fence_api.Release declares @Generation as int, expected bigint"]
        );
    }

    #[test]
    fn a_missing_procedure_is_named() {
        let rows: Vec<_> = catalog().into_iter().filter(|r| r.procedure != "getoutcome").collect();
        assert_eq!(problems(&rows), ["fence_api.GetOutcome is missing"]);
    }

    #[test]
    fn a_key_declared_256_wide_is_reported_because_it_would_truncate() {
        let mut rows = catalog();
        let key = rows.iter_mut().find(|r| r.procedure == "acquire").unwrap();
        key.max_length = Some(512);
        assert_eq!(
            problems(&rows),
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
        let text = "CREATE PROCEDURE fence_api.Renew @ResourceKey nvarchar(4000), @Owner uniqueidentifier, \
                    @Gen bigint, @LeaseSeconds int AS SELECT 1";
        assert_eq!(
            differences(&rows, &[("renew".to_string(), Some(text.to_string()))]).problems,
            [
                "fence_api.Renew has no parameter @Generation",
                "fence_api.Renew has a parameter @Gen without a default, which this client does not pass"
            ]
        );
    }

    #[test]
    fn each_statement_binds_the_parameters_by_name_in_order() {
        assert_eq!(
            Procedure::Publish.statement(),
            "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @OperationId = @P4, @Payload = @P5, @Release = @P6, @SourceVersion = @P7"
        );
    }

    #[test]
    fn a_deployed_version_is_accepted_with_the_same_major_and_a_minor_as_new() {
        let v = |major, minor| ContractVersion { major, minor };
        let needed = CONTRACT_VERSION;
        assert_eq!(version_problem(needed), None);
        assert_eq!(version_problem(v(needed.major, needed.minor + 1)), None);
        assert_eq!(
            version_problem(v(needed.major + 1, 0)),
            Some(format!(
                "the database speaks contract v{}.0, this client needs {needed} (a different major version)",
                needed.major + 1
            ))
        );
        if needed.minor > 0 {
            let older = v(needed.major, needed.minor - 1);
            assert_eq!(
                version_problem(older),
                Some(format!(
                    "the database speaks contract {older}, this client needs {needed} (an older minor version)"
                ))
            );
        }
    }

    #[test]
    fn an_appended_parameter_with_a_default_is_a_warning_and_without_one_a_problem() {
        let mut rows = catalog();
        let extra = |name: &str| CatalogRow {
            procedure: "inspect".into(),
            parameter: Some(name.into()),
            type_name: Some("int".into()),
            max_length: Some(4),
        };
        rows.push(extra("@detail"));
        let text = |default: &str| {
            vec![(
                "Inspect".to_string(),
                Some(format!(
                    "CREATE PROCEDURE fence_api.Inspect @ResourceKey nvarchar(4000), @Detail int{default} AS SELECT 1;"
                )),
            )]
        };
        let optional = differences(&rows, &text(" = 0"));
        assert_eq!(optional.problems, Vec::<String>::new());
        assert_eq!(
            optional.warnings,
            [
                "fence_api.Inspect has an optional parameter @detail this client does not pass (a later contract's addition)"
            ]
        );
        let required = differences(&rows, &text(""));
        assert_eq!(
            required.problems,
            ["fence_api.Inspect has a parameter @detail without a default, which this client does not pass"]
        );
        // Unreadable text: the contract's promise, with a warning that says so.
        let unreadable = differences(&rows, &[("Inspect".to_string(), None)]);
        assert!(unreadable.problems.is_empty());
        assert_eq!(unreadable.warnings.len(), 1);
    }

    #[test]
    fn a_default_is_found_after_a_sized_type_and_not_in_the_next_parameter() {
        let text = "CREATE PROCEDURE x.P @A nvarchar(10), @B int = 1, @C decimal(5, 2) = NULL AS SELECT 1";
        assert!(!has_default(text, "@a"));
        assert!(has_default(text, "@B"));
        assert!(has_default(text, "@C"));
        assert!(!has_default(text, "@Missing"));
    }
}
