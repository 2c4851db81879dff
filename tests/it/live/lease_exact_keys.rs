//! A key is an exact identifier (contract v1.1): keys that differ in case are
//! two fences, a key ending in a space is refused, and the length limit counts
//! UTF-16 code units as `nvarchar(256)` stores them. Databases deployed before
//! this rule move to it with every row kept. The first two tests share one
//! database, each with keys of its own; the upgrade has a database of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::{Error, Parameter, Provision, Publication, Publish};
use fencepost::deploy::Sources;
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{acquired, unwarmed};
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";

#[tokio::test]
async fn keys_that_differ_in_case_are_two_fences_and_a_trailing_space_is_refused() {
    let Some(db) =
        TestDatabase::shared("keys_that_differ_in_case_are_two_fences_and_a_trailing_space_is_refused").await
    else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    // Keys of this test's own (the database is shared), differing only in
    // the case of `Job`.
    let prefix = format!("{}:", Uuid::new_v4().simple());
    let (upper, lower) = (format!("{prefix}Job"), format!("{prefix}job"));
    let (upper, lower) = (upper.as_str(), lower.as_str());
    assert_eq!(client.provision(upper).await.unwrap(), Provision::Created);
    assert_eq!(client.provision(lower).await.unwrap(), Provision::Created);
    let a = acquired(client.acquire(upper, Duration::from_secs(60)).await.unwrap());
    let b = acquired(client.acquire(lower, Duration::from_secs(60)).await.unwrap());
    assert_eq!(
        (a.generation(), b.generation()),
        (1, 1),
        "each key has a generation of its own"
    );
    assert_eq!(
        client.publish(&a, Uuid::new_v4(), "upper").await.unwrap(),
        Publish::Published
    );
    assert_eq!(
        client.publish(&b, Uuid::new_v4(), "lower").await.unwrap(),
        Publish::Published
    );
    assert!(
        matches!(client.read_publication(upper).await.unwrap(), Publication::Found { payload, .. } if payload == "upper")
    );
    assert!(
        matches!(client.read_publication(lower).await.unwrap(), Publication::Found { payload, .. } if payload == "lower")
    );

    match client.provision(&format!("{prefix}job ")).await {
        Err(Error::InvalidInput { parameter, .. }) => assert_eq!(parameter, Parameter::ResourceKey),
        other => panic!("the client took a key ending in a space: {other:?}"),
    }
    let mut raw = Caller::new(db.connect().await);
    for key in [format!("{prefix}job "), format!("{prefix}Job "), " ".to_string()] {
        let answer = raw.call(PROVISION, &[&key.as_str()]).await;
        assert_eq!(answer.error_number(), Some(50101), "{key:?}: {answer:?}");
    }
    let rows = db
        .query(&format!(
            "SELECT COUNT(*) FROM fence.Resource WHERE ResourceKey LIKE N'{prefix}%' OR ResourceKey = N' '"
        ))
        .await;
    assert_eq!(rows[0].get::<i32, _>(0), Some(2));
    drop((client, raw));
    db.drop().await;
}

#[tokio::test]
async fn the_key_limit_counts_utf16_code_units_as_nvarchar_stores_them() {
    let Some(db) = TestDatabase::shared("the_key_limit_counts_utf16_code_units_as_nvarchar_stores_them").await else {
        return;
    };
    let mut raw = Caller::new(db.connect().await);
    let fits = [
        "😀".repeat(128),
        "é".repeat(256),
        "k".repeat(256),
        format!("{}k", "😀".repeat(127)),
    ];
    let too_long = [
        format!("{}k", "😀".repeat(128)),
        "k".repeat(257),
        "😀".repeat(129),
        String::new(),
    ];
    for key in &fits {
        let answer = raw.call(PROVISION, &[&key.as_str()]).await;
        assert_eq!(answer.outcome(), "Created", "{} code units", key.encode_utf16().count());
    }
    for key in &too_long {
        let answer = raw.call(PROVISION, &[&key.as_str()]).await;
        assert_eq!(
            answer.error_number(),
            Some(50101),
            "{} code units",
            key.encode_utf16().count()
        );
    }
    // The client draws the line at the same place.
    let client = unwarmed(&db.ado()).await;
    for key in &fits {
        assert_eq!(client.provision(key).await.unwrap(), Provision::Exists);
    }
    for key in &too_long {
        assert_eq!(
            client.provision(key).await.unwrap_err().parameter(),
            Some(Parameter::ResourceKey)
        );
    }
    drop((client, raw));
    db.drop().await;
}

/// The shipped sources with only the first migration, as a database deployed
/// before keys became exact was.
fn first_migration_only() -> Sources {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let v1 = std::fs::read(root.join("V1__lease_tables.sql")).unwrap();
    Sources::from_files(vec![("V1__lease_tables.sql".into(), v1)], vec![], vec![]).unwrap()
}

#[tokio::test]
async fn a_database_from_before_exact_keys_moves_to_them_with_every_row_kept() {
    let Some(db) = TestDatabase::new("a_database_from_before_exact_keys_moves_to_them_with_every_row_kept").await
    else {
        return;
    };
    db.migrate(&first_migration_only()).await.expect("deploy V1");
    let operation = Uuid::new_v4();
    db.exec(&format!(
        "INSERT INTO fence.Resource (ResourceKey, Generation, Owner, LeaseUntilUtc, PublishedGeneration, Payload,
                                     PublishedAtUtc, ProvisionedAtUtc)
         VALUES (N'Job', 3, NULL, NULL, 2, N'kept', SYSUTCDATETIME(), SYSUTCDATETIME());
         INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc)
         VALUES ('{operation}', N'Job', 2, SYSUTCDATETIME());"
    ))
    .await;

    db.migrate(&Sources::embedded().unwrap())
        .await
        .expect("deploy the rest");
    let client = unwarmed(&db.ado()).await;
    assert!(matches!(
        client.read_publication("Job").await.unwrap(),
        Publication::Found { generation: 2, ref payload, .. } if payload == "kept"
    ));
    assert!(matches!(
        client.outcome(operation).await.unwrap(),
        fencepost::client::OperationOutcome::Published { generation: 2, ref resource_key, .. } if resource_key == "Job"
    ));
    // The generation goes on from where it was, and `job` is a new fence.
    let lease = acquired(client.acquire("Job", Duration::from_secs(60)).await.unwrap());
    assert_eq!(lease.generation(), 4);
    assert_eq!(client.provision("job").await.unwrap(), Provision::Created);
    drop(client);
    db.drop().await;
}
