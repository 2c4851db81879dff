//! The start-up check that the database holds the contract: the catalog's
//! procedures and parameters, read in one query, compared with what this
//! client calls.

use super::procedure::{Half, Procedure, SqlType};

use SqlType as T;

/// Lists every procedure of the fence schemas with its parameters, one row
/// per parameter. The catalog shows a login only the procedures it may run,
/// so an operator's login lists only the `fence_admin` procedures granted to
/// it, and a service's none of them. `sys.all_parameters` rather than
/// `sys.parameters`: both hold user procedures' parameters on SQL Server, and
/// only the former exists on Babelfish.
pub(crate) const CATALOG_QUERY: &str = "\
SELECT s.name AS SchemaName, p.name AS ProcedureName, prm.name AS ParameterName, t.name AS TypeName, \
       CAST(prm.max_length AS int) AS MaxLength \
  FROM sys.procedures AS p \
  JOIN sys.schemas AS s ON s.schema_id = p.schema_id \
  LEFT JOIN sys.all_parameters AS prm ON prm.object_id = p.object_id \
  LEFT JOIN sys.types AS t ON t.user_type_id = prm.user_type_id \
 WHERE s.name IN (N'fence_api', N'fence_admin') \
 ORDER BY s.name, p.name, prm.parameter_id";

/// The text of every procedure of the fence schemas, NULL where the login may
/// not read it: only the text says whether an extra parameter has a default
/// (`has_default_value` is 0 for T-SQL procedures on SQL Server and on Babelfish).
pub(crate) const DEFINITION_QUERY: &str = "\
SELECT s.name AS SchemaName, p.name AS ProcedureName, CAST(m.definition AS nvarchar(max)) AS Definition \
  FROM sys.procedures AS p \
  JOIN sys.schemas AS s ON s.schema_id = p.schema_id \
  LEFT JOIN sys.sql_modules AS m ON m.object_id = p.object_id \
 WHERE s.name IN (N'fence_api', N'fence_admin')";

/// One row of [`CATALOG_QUERY`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CatalogRow {
    pub schema: String,
    pub procedure: String,
    pub parameter: Option<String>,
    pub type_name: Option<String>,
    /// Bytes; -1 for `max`.
    pub max_length: Option<i32>,
}

/// One row of [`DEFINITION_QUERY`]: a procedure's text, `None` where unreadable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Definition {
    pub schema: String,
    pub procedure: String,
    pub text: Option<String>,
}

/// Whether a catalog row names `procedure`. Names compare without regard to
/// case: the catalog of some engines folds them.
fn names(schema: &str, name: &str, procedure: Procedure) -> bool {
    schema.eq_ignore_ascii_case(procedure.schema()) && name.eq_ignore_ascii_case(procedure.short_name())
}

/// Compares the catalog with the contract, for a client that calls the
/// procedures of `caller`'s half, and names every difference. A service
/// needs every `fence_api` procedure listed. An operator's login sees only
/// the `fence_admin` procedures granted to it, so one not listed may be
/// missing or only not granted: at least one must be listed. Any other
/// procedure listed is compared too. `definitions` holds each procedure's
/// text, read only to tell an appended optional parameter, a compatible
/// change, from one every call would have to pass.
pub(crate) fn differences(catalog: &[CatalogRow], definitions: &[Definition], caller: Half) -> Differences {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let mut listed_for_operator = false;
    for procedure in Procedure::ALL {
        let rows: Vec<&CatalogRow> = catalog
            .iter()
            .filter(|r| names(&r.schema, &r.procedure, procedure))
            .collect();
        if rows.is_empty() {
            if caller == Half::Service && procedure.half() == Half::Service {
                problems.push(format!("{} is missing", procedure.name()));
            }
            continue;
        }
        listed_for_operator |= procedure.half() == Half::Operator;
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
                .find(|d| names(&d.schema, &d.procedure, procedure))
                .and_then(|d| d.text.as_deref());
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
    if caller == Half::Operator && !listed_for_operator {
        problems.push(
            "no fence_admin procedure is visible to this login: they are missing, or none is granted to it \
             (fence_operator, fence_recovery or fence_reader)"
                .to_string(),
        );
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

// The tests compare against the shipped procedures, which are embedded with
// feature "deploy".
#[cfg(all(test, feature = "deploy"))]
mod tests {
    use super::*;

    use crate::deploy::Sources;
    use crate::tsql::tokenize;

    /// The rows the catalog query lists for the shipped
    /// `procedures/fence_api.*.sql` and `fence_admin.*.sql`, read from their
    /// parameter lists.
    fn shipped_catalog() -> Vec<CatalogRow> {
        let sources = Sources::embedded().unwrap();
        let fence = sources
            .procedures()
            .iter()
            .filter(|p| p.file().starts_with("fence_api.") || p.file().starts_with("fence_admin."));
        fence.flat_map(|p| declared_parameters(p.text())).collect()
    }

    /// The rows an operator's login lists: the `fence_admin` procedures only.
    fn operator_catalog() -> Vec<CatalogRow> {
        shipped_catalog()
            .into_iter()
            .filter(|r| r.schema == "fence_admin")
            .collect()
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
        let schema = unquoted(code[create + 2]);
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
                schema: schema.clone(),
                procedure: procedure.clone(),
                parameter: Some(parameter.to_string()),
                type_name: Some(type_name),
                max_length,
            });
        }
        if rows.is_empty() {
            // The catalog's LEFT JOIN lists a procedure without parameters once.
            rows.push(CatalogRow {
                schema,
                procedure,
                parameter: None,
                type_name: None,
                max_length: None,
            });
        }
        rows
    }

    fn problems(rows: &[CatalogRow]) -> Vec<String> {
        differences(rows, &[], Half::Service).problems
    }

    fn text(procedure: &str, text: String) -> Vec<Definition> {
        vec![Definition {
            schema: "fence_api".to_string(),
            procedure: procedure.to_string(),
            text: Some(text),
        }]
    }

    /// Names as Babelfish's catalog lists them: lower-cased.
    fn folded(rows: Vec<CatalogRow>) -> Vec<CatalogRow> {
        let lower = |s: Option<String>| s.map(|s| s.to_lowercase());
        rows.into_iter()
            .map(|r| CatalogRow {
                schema: r.schema.to_lowercase(),
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
    fn a_service_login_that_sees_no_operator_procedure_has_no_differences() {
        let service: Vec<_> = catalog().into_iter().filter(|r| r.schema == "fence_api").collect();
        assert_eq!(problems(&service), Vec::<String>::new());
    }

    #[test]
    fn an_operator_login_needs_only_the_operator_procedures_it_sees() {
        let check = |rows: &[CatalogRow]| differences(rows, &[], Half::Operator).problems;
        assert_eq!(check(&operator_catalog()), Vec::<String>::new());
        assert_eq!(check(&folded(operator_catalog())), Vec::<String>::new());
        // What fence_operator sees: Recover and PruneTenure are fence_recovery's.
        let operator: Vec<_> = operator_catalog()
            .into_iter()
            .filter(|r| r.procedure != "Recover" && r.procedure != "PruneTenure")
            .collect();
        assert_eq!(check(&operator), Vec::<String>::new());
        assert_eq!(
            check(&[]),
            [
                "no fence_admin procedure is visible to this login: they are missing, or none is granted to it \
              (fence_operator, fence_recovery or fence_reader)"
            ]
        );
    }

    #[test]
    fn an_operator_procedure_that_is_listed_is_compared_for_every_caller() {
        let mut rows = shipped_catalog();
        let floor = rows
            .iter_mut()
            .find(|r| r.procedure == "Recover" && r.parameter.as_deref() == Some("@Floor"))
            .unwrap();
        floor.type_name = Some("int".into());
        let expected = ["fence_admin.Recover declares @Floor as int, expected bigint"];
        assert_eq!(problems(&rows), expected);
        assert_eq!(differences(&rows, &[], Half::Operator).problems, expected);
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
            differences(&rows, &self::text("renew", text.to_string()), Half::Service).problems,
            [
                "fence_api.Renew has no parameter @Generation",
                "fence_api.Renew has a parameter @Gen without a default, which this client does not pass"
            ]
        );
    }

    #[test]
    fn an_appended_parameter_with_a_default_is_a_warning_and_without_one_a_problem() {
        let mut rows = catalog();
        let extra = |name: &str| CatalogRow {
            schema: "fence_api".into(),
            procedure: "inspect".into(),
            parameter: Some(name.into()),
            type_name: Some("int".into()),
            max_length: Some(4),
        };
        rows.push(extra("@detail"));
        let definition = |default: &str| {
            text(
                "Inspect",
                format!(
                    "CREATE PROCEDURE fence_api.Inspect @ResourceKey nvarchar(4000), @Detail int{default} AS SELECT 1;"
                ),
            )
        };
        let optional = differences(&rows, &definition(" = 0"), Half::Service);
        assert_eq!(optional.problems, Vec::<String>::new());
        assert_eq!(
            optional.warnings,
            [
                "fence_api.Inspect has an optional parameter @detail this client does not pass (a later contract's addition)"
            ]
        );
        let required = differences(&rows, &definition(""), Half::Service);
        assert_eq!(
            required.problems,
            ["fence_api.Inspect has a parameter @detail without a default, which this client does not pass"]
        );
        // Unreadable text: the contract's promise, with a warning that says so.
        let unreadable = differences(
            &rows,
            &[Definition {
                schema: "fence_api".into(),
                procedure: "Inspect".into(),
                text: None,
            }],
            Half::Service,
        );
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
