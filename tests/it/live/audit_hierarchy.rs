//! The permission hierarchy `check` ships (`src/audit/permissions.tsv`)
//! against the engine's own, `sys.fn_builtin_permissions(DEFAULT)`: every
//! permission of a class the snapshot lists must be in it, with the same
//! covering and parent permission. Where the engine cannot answer (Babelfish
//! has no such function, or one that lists less), the test reports a skip
//! with what the engine said.

use std::collections::{BTreeMap, BTreeSet};

use crate::support;

use fencepost::audit::hierarchy::builtin_permissions;
use support::{TestDatabase, skip};

type Key = (String, String);
/// Covering permission, parent class, parent covering permission.
type Implied = (Option<String>, Option<String>, Option<String>);

fn norm(s: Option<&str>) -> Option<String> {
    s.map(|s| s.trim().to_uppercase()).filter(|s| !s.is_empty())
}

fn snapshot() -> BTreeMap<Key, (Implied, bool)> {
    builtin_permissions()
        .iter()
        .map(|r| {
            (
                (r.class.to_uppercase(), r.permission.to_uppercase()),
                (
                    (norm(r.covering), norm(r.parent_class), norm(r.parent_covering)),
                    r.since.is_some(),
                ),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_shipped_permission_hierarchy_is_the_engines() {
    let test = "the_shipped_permission_hierarchy_is_the_engines";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let babelfish = db.is_babelfish().await;
    let sql = "SELECT CAST(class_desc AS nvarchar(60)), CAST(permission_name AS nvarchar(128)),
                      CAST(covering_permission_name AS nvarchar(128)), CAST(parent_class_desc AS nvarchar(60)),
                      CAST(parent_covering_permission_name AS nvarchar(128)),
                      CAST(SERVERPROPERTY('ProductMajorVersion') AS int)
                 FROM sys.fn_builtin_permissions(DEFAULT);";
    let answer = match db.connect().await.simple_query(sql).await {
        Ok(stream) => stream.into_first_result().await,
        Err(e) => Err(e),
    };
    let rows = match answer {
        Ok(rows) => rows,
        // Babelfish 4.2 has no such function.
        Err(e)
            if babelfish
                && e.to_string().contains("sys.fn_builtin_permissions")
                && e.to_string().contains("does not exist") =>
        {
            skip(
                test,
                &format!(
                    "Babelfish cannot read sys.fn_builtin_permissions(DEFAULT), so the snapshot is not compared: {e}"
                ),
            );
            db.drop().await;
            return;
        }
        Err(e) => panic!("{sql}: {e}"),
    };
    let major = rows.first().and_then(|r| r.get::<i32, usize>(5)).unwrap_or(0);
    let engine: BTreeMap<Key, Implied> = rows
        .iter()
        .filter_map(|r| {
            let class = norm(r.get::<&str, usize>(0))?;
            let permission = norm(r.get::<&str, usize>(1))?;
            Some((
                (class, permission),
                (
                    norm(r.get::<&str, usize>(2)),
                    norm(r.get::<&str, usize>(3)),
                    norm(r.get::<&str, usize>(4)),
                ),
            ))
        })
        .collect();
    let shipped = snapshot();
    let classes: BTreeSet<&String> = shipped.keys().map(|(c, _)| c).collect();
    let mut differ = Vec::new();
    for (key, (implied, newer)) in &shipped {
        match engine.get(key) {
            Some(e) if e == implied => {}
            Some(e) => differ.push(format!("{} {}: shipped {implied:?}, engine {e:?}", key.0, key.1)),
            // Added in SQL Server 2022: an older engine does not have it.
            None if *newer && major < 16 => {}
            None => differ.push(format!("{} {}: shipped, not in the engine", key.0, key.1)),
        }
    }
    for key in engine
        .keys()
        .filter(|k| classes.contains(&k.0) && !shipped.contains_key(*k))
    {
        differ.push(format!("{} {}: in the engine, not shipped", key.0, key.1));
    }
    if babelfish && !differ.is_empty() {
        skip(
            test,
            &format!(
                "Babelfish's sys.fn_builtin_permissions(DEFAULT) lists {} permissions and differs from SQL Server's \
                 hierarchy in {} of the shipped ones, so the snapshot is not compared there",
                engine.len(),
                differ.len()
            ),
        );
        db.drop().await;
        return;
    }
    assert!(
        differ.is_empty(),
        "the shipped permission hierarchy differs from the engine's (version {major}):\n{}",
        differ.join("\n")
    );
    db.drop().await;
}
