//! Everything one deployment applies: migrations, procedures and permission
//! scripts, embedded in the binary or read from a folder with the same layout.

use std::path::Path;

use include_dir::{Dir, include_dir};

use super::error::SourceError;
use super::migration::MigrationSource;
use super::permission::ScriptSource;
use super::procedure::ProcedureSource;
use crate::tsql::normalize;

static EMBEDDED_MIGRATIONS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/migrations");
static EMBEDDED_PROCEDURES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/procedures");
static EMBEDDED_PERMISSIONS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/permissions");

/// Everything one deployment applies, in the order it applies it.
#[derive(Clone, Debug)]
pub struct Sources {
    migrations: Vec<MigrationSource>,
    procedures: Vec<ProcedureSource>,
    permissions: Vec<ScriptSource>,
}

impl Sources {
    /// The T-SQL compiled into this binary.
    pub fn embedded() -> Result<Self, SourceError> {
        Self::from_files(
            embedded_files(&EMBEDDED_MIGRATIONS),
            embedded_files(&EMBEDDED_PROCEDURES),
            embedded_files(&EMBEDDED_PERMISSIONS),
        )
    }

    /// Reads `migrations/`, `procedures/` and `permissions/` under `root`.
    pub fn from_dir(root: &Path) -> Result<Self, SourceError> {
        Self::from_files(
            folder_files(&root.join("migrations"))?,
            folder_files(&root.join("procedures"))?,
            folder_files(&root.join("permissions"))?,
        )
    }

    /// Builds a source set from `(file name, contents)` lists.
    pub fn from_files(
        migrations: Vec<(String, Vec<u8>)>,
        procedures: Vec<(String, Vec<u8>)>,
        permissions: Vec<(String, Vec<u8>)>,
    ) -> Result<Self, SourceError> {
        let mut migrations = sql_files(migrations)?
            .map(|(file, text)| MigrationSource::parse(&file, &text))
            .collect::<Result<Vec<_>, _>>()?;
        migrations.sort_by_key(MigrationSource::version);
        for pair in migrations.windows(2) {
            if pair[0].version() == pair[1].version() {
                return Err(SourceError::DuplicateVersion {
                    version: pair[0].version(),
                    first: pair[0].file().to_string(),
                    second: pair[1].file().to_string(),
                });
            }
        }
        let procedures = sql_files(procedures)?
            .map(|(file, text)| ProcedureSource::parse(&file, &text))
            .collect::<Result<Vec<_>, _>>()?;
        let permissions = sql_files(permissions)?
            .map(|(file, text)| ScriptSource::parse(&file, &text))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            migrations,
            procedures,
            permissions,
        })
    }

    /// Migrations by ascending version.
    pub fn migrations(&self) -> &[MigrationSource] {
        &self.migrations
    }

    /// Procedures by file name.
    pub fn procedures(&self) -> &[ProcedureSource] {
        &self.procedures
    }

    /// Permission scripts by file name, which is the order they run in.
    pub fn permissions(&self) -> &[ScriptSource] {
        &self.permissions
    }
}

/// A source set with a script added, replaced or left out: how the tests
/// deploy a migration, procedure or permission script that does not ship.
/// Test hooks, not API: they exist with the `testing` feature (which the
/// integration tests turn on, docs/testing.md) or in this crate's unit tests.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
impl Sources {
    /// Replaces one procedure's text.
    pub fn with_procedure(mut self, file: &str, text: &str) -> Result<Self, SourceError> {
        let replacement = ProcedureSource::parse(file, &normalize(text))?;
        match self.procedures.iter_mut().find(|p| p.file() == file) {
            Some(slot) => *slot = replacement,
            None => self.procedures.push(replacement),
        }
        self.procedures.sort_by(|a, b| a.file().cmp(b.file()));
        Ok(self)
    }

    /// The same sources without permission scripts.
    pub fn without_permissions(mut self) -> Self {
        self.permissions.clear();
        self
    }

    /// Adds a permission script, or replaces the one with the same file name.
    pub fn with_permission(mut self, file: &str, text: &str) -> Result<Self, SourceError> {
        let added = ScriptSource::parse(file, &normalize(text))?;
        self.permissions.retain(|p| p.file() != file);
        self.permissions.push(added);
        self.permissions.sort_by(|a, b| a.file().cmp(b.file()));
        Ok(self)
    }

    /// Adds a migration, or replaces the one with the same version.
    pub fn with_migration(mut self, file: &str, text: &str) -> Result<Self, SourceError> {
        let added = MigrationSource::parse(file, &normalize(text))?;
        self.migrations.retain(|m| m.version() != added.version());
        self.migrations.push(added);
        self.migrations.sort_by_key(MigrationSource::version);
        Ok(self)
    }
}

/// The `.sql` files of a list, decoded and normalised, sorted by name.
fn sql_files(files: Vec<(String, Vec<u8>)>) -> Result<impl Iterator<Item = (String, String)>, SourceError> {
    let mut decoded = Vec::new();
    for (name, bytes) in files {
        if !name.ends_with(".sql") {
            continue;
        }
        let text = String::from_utf8(bytes).map_err(|_| SourceError::NotUtf8 { file: name.clone() })?;
        decoded.push((name, normalize(&text)));
    }
    decoded.sort();
    Ok(decoded.into_iter())
}

fn embedded_files(dir: &Dir<'_>) -> Vec<(String, Vec<u8>)> {
    dir.files()
        .map(|f| {
            (
                f.path().file_name().unwrap_or_default().to_string_lossy().into_owned(),
                f.contents().to_vec(),
            )
        })
        .collect()
}

fn folder_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, SourceError> {
    let unreadable = |source| SourceError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if path.is_file() {
            let bytes = std::fs::read(&path).map_err(|source| SourceError::Unreadable {
                path: path.clone(),
                source,
            })?;
            files.push((
                path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                bytes,
            ));
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsql::checksum;

    fn one_migration(text: &str) -> Sources {
        Sources::from_files(vec![("V1__a.sql".into(), text.as_bytes().to_vec())], vec![], vec![]).unwrap()
    }

    const FOLDERS: [&str; 3] = ["migrations", "procedures", "permissions"];

    /// `(file, text)` of each `.sql` file of a repository folder, read from disk.
    fn on_disk(folder: &str) -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "sql"))
            .map(|path| {
                let text = std::fs::read_to_string(&path).unwrap();
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    normalize(&text),
                )
            })
            .collect();
        assert!(!files.is_empty(), "{} holds no .sql file", dir.display());
        files.sort();
        files
    }

    /// `(file, text)` of each file of a source set, folder by folder, by name.
    fn texts(s: &Sources) -> [Vec<(String, String)>; 3] {
        let pair = |file: &str, text: &str| (file.to_string(), text.to_string());
        let mut migrations: Vec<_> = s
            .migrations()
            .iter()
            .map(|m| pair(m.file(), m.migration().sql().unwrap_or_default()))
            .collect();
        migrations.sort();
        [
            migrations,
            s.procedures().iter().map(|p| pair(p.file(), p.text())).collect(),
            s.permissions().iter().map(|p| pair(p.file(), p.text())).collect(),
        ]
    }

    fn assert_same_as_disk(sources: &Sources) {
        for (folder, files) in FOLDERS.iter().zip(texts(sources)) {
            assert_eq!(files, on_disk(folder), "{folder}/ differs");
        }
    }

    #[test]
    fn the_embedded_sources_are_the_repository_folders_file_by_file() {
        assert_same_as_disk(&Sources::embedded().unwrap());
    }

    #[test]
    fn checksums_do_not_change_with_line_endings() {
        let lf = one_migration("CREATE TABLE t (a int);\nGO\nSELECT 1;\n");
        let crlf = one_migration("CREATE TABLE t (a int);\r\nGO\r\nSELECT 1;\r\n");
        assert_eq!(
            lf.migrations()[0].migration().checksum(),
            crlf.migrations()[0].migration().checksum()
        );
        assert_eq!(checksum(&normalize("a\r\nb")), checksum("a\nb"));
    }

    #[test]
    fn checksums_do_change_with_content() {
        let a = one_migration("SELECT 1;\n");
        let b = one_migration("SELECT 2;\n");
        assert_ne!(
            a.migrations()[0].migration().checksum(),
            b.migrations()[0].migration().checksum()
        );
    }

    #[test]
    fn migrations_run_in_version_order_not_name_order() {
        let s = Sources::from_files(
            vec![
                ("V10__b.sql".into(), b"SELECT 10;".to_vec()),
                ("V9__a.sql".into(), b"SELECT 9;".to_vec()),
            ],
            vec![],
            vec![],
        )
        .unwrap();
        let versions: Vec<i32> = s.migrations().iter().map(|m| m.version()).collect();
        assert_eq!(versions, [9, 10]);
    }

    #[test]
    fn two_files_with_one_version_are_refused() {
        let err = Sources::from_files(
            vec![
                ("V1__a.sql".into(), b"SELECT 1;".to_vec()),
                ("V1__b.sql".into(), b"SELECT 2;".to_vec()),
            ],
            vec![],
            vec![],
        )
        .unwrap_err();
        assert!(matches!(err, SourceError::DuplicateVersion { version: 1, .. }));
    }

    #[test]
    fn a_badly_named_migration_is_refused_naming_the_file() {
        let err = Sources::from_files(vec![("initial.sql".into(), b"SELECT 1;".to_vec())], vec![], vec![]).unwrap_err();
        assert!(err.to_string().contains("migrations/initial.sql"), "{err}");
    }

    #[test]
    fn a_use_statement_in_a_migration_or_permission_script_is_refused_with_its_line() {
        let err = Sources::from_files(
            vec![("V2__a.sql".into(), b"SELECT 1;\nGO\nUSE master;\n".to_vec())],
            vec![],
            vec![],
        )
        .unwrap_err();
        assert!(
            matches!(err, SourceError::UseStatement { ref file, line: 3 } if file == "migrations/V2__a.sql"),
            "{err:?}"
        );
        let err = Sources::from_files(vec![], vec![], vec![("010_r.sql".into(), b"USE other;".to_vec())]).unwrap_err();
        assert!(
            err.to_string().starts_with("permissions/010_r.sql, line 1: USE"),
            "{err}"
        );
    }

    #[test]
    fn a_non_utf8_file_is_refused_naming_it() {
        let err = Sources::from_files(vec![("V1__a.sql".into(), vec![0xff, 0xfe, 0x00])], vec![], vec![]).unwrap_err();
        assert!(matches!(err, SourceError::NotUtf8 { ref file } if file == "V1__a.sql"));
    }

    #[test]
    fn a_go_line_that_is_not_a_separator_is_refused_naming_the_file_and_line() {
        let text = b"CREATE PROCEDURE fence_api.Tmp AS SELECT 1;\nGO;\nDROP TABLE fence.Resource;\n";
        let err = Sources::from_files(vec![("V2__a.sql".into(), text.to_vec())], vec![], vec![]).unwrap_err();
        assert!(
            err.to_string().starts_with("migrations/V2__a.sql, line 2: `GO;`"),
            "{err}"
        );
        let err =
            Sources::from_files(vec![], vec![], vec![("010_r.sql".into(), b"SELECT 1\nGO 5;".to_vec())]).unwrap_err();
        assert!(err.to_string().starts_with("permissions/010_r.sql, line 2"), "{err}");
    }

    #[test]
    fn reading_the_repository_folders_gives_their_files_file_by_file() {
        assert_same_as_disk(&Sources::from_dir(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap());
    }
}
