//! A permission script, `permissions/<order>_<name>.sql`: split on `GO`
//! and refused when it holds a `USE`.

use super::error::SourceError;
use super::lint::refuse_use;
use crate::tsql::{Batch, split_batches};

/// A permission script, `permissions/<order>_<name>.sql`, re-applied on every
/// deploy and therefore written to be idempotent.
#[derive(Clone, Debug)]
pub struct ScriptSource {
    file: String,
    text: String,
    batches: Vec<Batch>,
}

impl ScriptSource {
    pub(crate) fn parse(file: &str, text: &str) -> Result<Self, SourceError> {
        let batches = split_batches(text).map_err(|line| SourceError::BadGo {
            file: format!("permissions/{file}"),
            line,
        })?;
        refuse_use(&format!("permissions/{file}"), text)?;
        Ok(Self {
            file: file.to_string(),
            text: text.to_string(),
            batches,
        })
    }

    /// The file name.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The script text, with line ends normalised to LF.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The batches the file splits into on `GO` lines.
    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }
}
