//! Turns the answers of the catalog queries into a [`Catalog`], each answer
//! read by the decoder declared with its query.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::Catalog;
use super::query::{Query, Reading};

/// Decodes `answers`, one per query in `queries`' order (`None` for an
/// optional query that failed).
pub(super) fn build(queries: &[Query], answers: Vec<Option<Vec<Row>>>) -> Result<Catalog, AuditError> {
    // Answers carry no name, only a place: with one too many or too few, every
    // answer after the gap would be read by the next query's decoder, and no
    // one answer can be said to be the missing one.
    if answers.len() != queries.len() {
        return Err(AuditError::ResultSets {
            queries: queries.len(),
            answered: answers.len(),
        });
    }
    let mut reading = Reading::default();
    for (query, rows) in queries.iter().zip(&answers) {
        (query.read)(rows.as_deref(), query.what, &mut reading)?;
    }
    Ok(reading.catalog)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use tiberius::{ColumnData, ColumnType, Row};

    use super::super::super::catalog::{Membership, PrincipalKind, Schema};
    use super::super::queries::queries;
    use super::*;

    fn text(value: Option<&str>) -> (ColumnType, ColumnData<'static>) {
        (
            ColumnType::NVarchar,
            ColumnData::String(value.map(|v| v.to_string().into())),
        )
    }

    fn int(value: i32) -> (ColumnType, ColumnData<'static>) {
        (ColumnType::Int4, ColumnData::I32(Some(value)))
    }

    fn row(cells: Vec<(ColumnType, ColumnData<'static>)>) -> Row {
        cells
            .into_iter()
            .enumerate()
            .fold(Row::builder(), |row, (i, (kind, data))| {
                row.column(format!("c{i}"), kind, data)
            })
            .build()
    }

    /// One answer per query, chosen by the query's name rather than its
    /// place: the engine, one user, one membership and one schema, and
    /// `principal` as the user's name; every other query failed.
    fn answers(queries: &[Query], principal: Option<&str>) -> Vec<Option<Vec<Row>>> {
        queries
            .iter()
            .map(|q| match q.what {
                "the database and engine" => Some(vec![row(vec![
                    text(Some("orders")),
                    int(1),
                    text(Some("SQL Server")),
                    int(0),
                ])]),
                "database principals" => Some(vec![row(vec![
                    text(principal),
                    text(Some("S")),
                    text(None),
                    text(Some("dbo")),
                ])]),
                "role memberships" => Some(vec![row(vec![text(Some("fence_caller")), text(Some("app"))])]),
                "schemas" => Some(vec![row(vec![text(Some("fence_api")), text(Some("dbo"))])]),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_answer_is_read_by_the_decoder_declared_with_its_query() {
        let queries = queries();
        let catalog = build(&queries, answers(&queries, Some("app"))).expect("the answers decode");
        assert_eq!(catalog.database, "orders");
        assert_eq!(catalog.engine.product, "SQL Server");
        assert!(catalog.engine.chains_ownership);
        let names: Vec<_> = catalog.principals.iter().map(|p| (p.name.as_str(), p.kind)).collect();
        assert_eq!(names, [("app", PrincipalKind::User)]);
        assert_eq!(catalog.principals[0].default_schema.as_deref(), Some("dbo"));
        assert_eq!(
            catalog.memberships,
            [Membership {
                role: "fence_caller".into(),
                member: "app".into()
            }]
        );
        assert_eq!(
            catalog.schemas,
            [Schema {
                name: "fence_api".into(),
                owner: "dbo".into()
            }]
        );
        // A failed optional query leaves its part unknown.
        assert_eq!(catalog.visibility, None);
        assert_eq!(catalog.server, None);
        assert!(catalog.signatures_unreadable.is_some());
    }

    #[test]
    fn a_decoder_names_its_own_query_when_its_answer_is_misshapen() {
        let queries = queries();
        match build(&queries, answers(&queries, None)) {
            Err(AuditError::UnexpectedShape { what, reason }) => {
                assert_eq!(what, "database principals");
                assert_eq!(reason, "column 0 is NULL");
            }
            other => panic!("expected the principals' answer refused, got {other:?}"),
        }
    }

    #[test]
    fn one_answer_too_few_or_too_many_is_refused_before_any_is_read() {
        let queries = queries();
        let at = queries.iter().position(|q| q.what == "database principals").unwrap();
        let mut too_few = answers(&queries, Some("app"));
        too_few.remove(at);
        let mut too_many = answers(&queries, Some("app"));
        too_many.insert(at, None);
        for (answers, answered) in [(too_few, queries.len() - 1), (too_many, queries.len() + 1)] {
            match build(&queries, answers) {
                Err(error @ AuditError::ResultSets { .. }) => assert_eq!(
                    error.to_string(),
                    format!(
                        "the {} catalog queries were answered with {answered} result sets",
                        queries.len()
                    )
                ),
                other => panic!("expected the count refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn every_query_has_a_name_of_its_own() {
        let queries = queries();
        let mut seen = HashSet::new();
        for q in &queries {
            assert!(seen.insert(q.what), "two queries read {}", q.what);
        }
    }
}
