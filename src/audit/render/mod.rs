//! Renders a report for people (a table) or pipelines (JSON, JUnit XML).

mod json;
mod junit;
mod text;

use super::Report;

/// Output format of a rendered report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// A table of rules, then each finding with its fix.
    Text,
    /// One JSON object: status, exit code, rules, findings, cannot-verify,
    /// accepted-unverifiable; its schema is docs/check-report.schema.json.
    Json,
    /// JUnit XML with one test case per rule, for CI systems.
    Junit,
}

/// Renders `report` in `format`, ending with a newline.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Text => text::render(report),
        Format::Json => json::render(report),
        Format::Junit => junit::render(report),
    }
}

/// The one-word status a pipeline branches on.
pub(crate) fn status(report: &Report) -> &'static str {
    match report.exit_code() {
        super::EXIT_CLEAN => "clean",
        super::EXIT_FINDINGS => "findings",
        _ => "cannot_verify",
    }
}
