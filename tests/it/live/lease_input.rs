//! Bad input, through the client (refused before any round trip, the
//! parameter named) and straight to the procedures (refused with the
//! documented THROW number); either way nothing changes. The tests share one
//! database: each works on keys of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::{Error, Parameter, Publication, Publish, Release};
use fencepost::{Client, Connection};
use support::TestDatabase;
use support::lease::{SHORT, acquired, provisioned, state, unwarmed};
use uuid::Uuid;

fn parameter_of<T: std::fmt::Debug>(result: Result<T, Error>) -> Parameter {
    match result {
        Err(Error::InvalidInput { parameter, .. }) => parameter,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[tokio::test]
async fn the_client_refuses_bad_input_naming_the_parameter_and_changes_nothing() {
    let Some(db) = TestDatabase::shared("the_client_refuses_bad_input_naming_the_parameter_and_changes_nothing").await
    else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let lease = acquired(a.acquire(&key, SHORT * 10).await.unwrap());
    let before = state(&a, &key).await;
    let long_key = "k".repeat(257);

    assert_eq!(parameter_of(a.provision("").await), Parameter::ResourceKey);
    assert_eq!(parameter_of(a.acquire(&long_key, SHORT).await), Parameter::ResourceKey);
    assert_eq!(parameter_of(a.inspect(&long_key).await), Parameter::ResourceKey);
    assert_eq!(
        parameter_of(a.acquire(&key, Duration::ZERO).await),
        Parameter::LeaseSeconds
    );
    assert_eq!(
        parameter_of(a.acquire(&key, Duration::from_millis(1500)).await),
        Parameter::LeaseSeconds
    );
    assert_eq!(
        parameter_of(a.acquire(&key, Duration::from_secs(86_401)).await),
        Parameter::LeaseSeconds
    );
    assert_eq!(
        parameter_of(a.acquire_as(&key, Uuid::nil(), SHORT).await),
        Parameter::Owner
    );
    assert_eq!(
        parameter_of(a.publish(&lease, Uuid::nil(), "x").await),
        Parameter::OperationId
    );
    assert_eq!(parameter_of(a.outcome(Uuid::nil()).await), Parameter::OperationId);

    assert_eq!(state(&a, &key).await, before);
    assert_eq!(a.read_publication(&key).await.unwrap(), Publication::NothingPublished);
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn an_operation_id_reused_in_another_generation_is_rejected_by_the_server_through_the_client() {
    let Some(db) = TestDatabase::shared(
        "an_operation_id_reused_in_another_generation_is_rejected_by_the_server_through_the_client",
    )
    .await
    else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let operation = Uuid::new_v4();
    let first = acquired(a.acquire(&key, SHORT * 5).await.unwrap());
    assert_eq!(a.publish(&first, operation, "one").await.unwrap(), Publish::Published);
    assert_eq!(a.release(&first).await.unwrap(), Release::Released);
    let second = acquired(a.acquire(&key, SHORT * 5).await.unwrap());
    let before = state(&a, &key).await;

    // Only the server can know the id was used elsewhere.
    match a.publish(&second, operation, "two").await {
        Err(
            error @ Error::Rejected {
                number: 50107,
                parameter: Parameter::OperationId,
                ..
            },
        ) => {
            assert!(!error.is_transient());
            assert_eq!(error.server_number(), Some(50107));
        }
        other => panic!("expected a 50107 rejection, got {other:?}"),
    }
    assert_eq!(state(&a, &key).await, before);
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

/// A raw argument, so the procedures can be sent what the client never sends.
enum Arg {
    Text(Option<String>),
    Id(Option<Uuid>),
    Int(Option<i32>),
    Big(Option<i64>),
}

/// Calls a procedure with raw arguments and returns the THROW number, if any.
async fn raw_error(conn: &mut Connection, sql: &str, args: &[Arg]) -> Option<u32> {
    let params: Vec<&dyn tiberius::ToSql> = args
        .iter()
        .map(|arg| match arg {
            Arg::Text(v) => v as &dyn tiberius::ToSql,
            Arg::Id(v) => v as &dyn tiberius::ToSql,
            Arg::Int(v) => v as &dyn tiberius::ToSql,
            Arg::Big(v) => v as &dyn tiberius::ToSql,
        })
        .collect();
    match conn.query(sql, &params).await {
        Err(e) => e.code(),
        Ok(stream) => stream.into_results().await.err().and_then(|e| e.code()),
    }
}

#[tokio::test]
async fn the_procedures_refuse_bad_input_with_the_documented_numbers_and_change_nothing() {
    let Some(db) =
        TestDatabase::shared("the_procedures_refuse_bad_input_with_the_documented_numbers_and_change_nothing").await
    else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let lease = acquired(a.acquire(&key, SHORT * 10).await.unwrap());
    let used = Uuid::new_v4();
    let other_key = provisioned(&a, "other").await;
    let other = acquired(a.acquire(&other_key, SHORT * 10).await.unwrap());
    assert_eq!(a.publish(&other, used, "elsewhere").await.unwrap(), Publish::Published);
    let before = (state(&a, &key).await, state(&a, &other_key).await);

    use Arg::*;
    let k = |s: &str| Text(Some(s.to_string()));
    let (owner, generation) = (Id(Some(lease.owner())), Big(Some(lease.generation())));
    let fresh = || Id(Some(Uuid::new_v4()));
    let acquire = "EXEC fence_api.Acquire @ResourceKey = @P1, @Owner = @P2, @LeaseSeconds = @P3";
    let renew = "EXEC fence_api.Renew @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @LeaseSeconds = @P4";
    let publish = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @OperationId = @P4, @Payload = @P5";
    let release = "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";
    // NULLs are written as literals: Babelfish refuses an untyped NULL string
    // parameter in the RPC stream itself (error 8009), before any procedure runs.
    let cases: Vec<(&str, &str, Vec<Arg>, u32)> = vec![
        ("empty key", acquire, vec![k(""), fresh(), Int(Some(5))], 50101),
        (
            "257-character key",
            acquire,
            vec![k(&"k".repeat(257)), fresh(), Int(Some(5))],
            50101,
        ),
        (
            "NULL key",
            "EXEC fence_api.Provision @ResourceKey = NULL",
            vec![],
            50101,
        ),
        (
            "257-character key",
            "EXEC fence_api.Inspect @ResourceKey = @P1",
            vec![k(&"k".repeat(257))],
            50101,
        ),
        (
            "nil owner",
            acquire,
            vec![k(&key), Id(Some(Uuid::nil())), Int(Some(5))],
            50102,
        ),
        (
            "NULL owner",
            "EXEC fence_api.Release @ResourceKey = @P1, @Owner = NULL, @Generation = @P2",
            vec![k(&key), Big(Some(1))],
            50102,
        ),
        ("zero lease", acquire, vec![k(&key), fresh(), Int(Some(0))], 50103),
        (
            "negative lease",
            renew,
            vec![
                k(&key),
                Id(Some(lease.owner())),
                Big(Some(lease.generation())),
                Int(Some(-5)),
            ],
            50103,
        ),
        (
            "lease over a day",
            acquire,
            vec![k(&key), fresh(), Int(Some(86_401))],
            50103,
        ),
        (
            "generation 0",
            release,
            vec![k(&key), Id(Some(lease.owner())), Big(Some(0))],
            50104,
        ),
        (
            "nil operation id",
            publish,
            vec![
                k(&key),
                Id(Some(lease.owner())),
                Big(Some(lease.generation())),
                Id(Some(Uuid::nil())),
                k("x"),
            ],
            50105,
        ),
        (
            "nil operation id",
            "EXEC fence_api.GetOutcome @OperationId = @P1",
            vec![Id(Some(Uuid::nil()))],
            50105,
        ),
        (
            "NULL payload",
            "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @OperationId = @P4, \
             @Payload = NULL",
            vec![k(&key), owner, generation, fresh()],
            50106,
        ),
        (
            "operation id of another resource",
            publish,
            vec![
                k(&key),
                Id(Some(lease.owner())),
                Big(Some(lease.generation())),
                Id(Some(used)),
                k("x"),
            ],
            50107,
        ),
    ];
    let mut conn = db.connect().await;
    for (what, sql, args, number) in &cases {
        assert_eq!(raw_error(&mut conn, sql, args).await, Some(*number), "{what}: {sql}");
    }

    assert_eq!((state(&a, &key).await, state(&a, &other_key).await), before);
    assert_eq!(a.read_publication(&key).await.unwrap(), Publication::NothingPublished);
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn a_key_of_256_characters_and_a_large_payload_are_accepted_whole() {
    let Some(db) = TestDatabase::shared("a_key_of_256_characters_and_a_large_payload_are_accepted_whole").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a: Client = unwarmed(&db.ado()).await;
    // 256 characters, the last one not ASCII, and no other test's.
    let key = format!("{}{}é", Uuid::new_v4().simple(), "k".repeat(223));
    a.provision(&key).await.unwrap();
    let lease = acquired(a.acquire(&key, SHORT * 5).await.unwrap());
    // No payload limit is documented: nvarchar(max). Well past the 4000
    // characters where a bounded nvarchar would stop.
    let payload: String = (0..100_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    assert_eq!(
        a.publish(&lease, Uuid::new_v4(), &payload).await.unwrap(),
        Publish::Published
    );
    match a.read_publication(&key).await.unwrap() {
        Publication::Found { payload: read, .. } => assert!(read == payload, "payload changed on the way"),
        other => panic!("{other:?}"),
    }
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}
