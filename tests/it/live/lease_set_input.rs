//! Input to the set procedures typed as the contract says, on a live
//! engine: a key, an operation id and a payload must be JSON strings, a
//! generation digits (a JSON number without exponent, or a string), each item of `@Leases` an
//! object and each item of `@ResourceKeys` a string, never an array of
//! them; JSON may begin with any whitespace; a character no key or payload
//! can hold on the engine is refused with the contract's error, never the
//! engine's own. Each refusal changes nothing.

use crate::support;

use super::lease_set::rows;
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{provisioned, state, worker};
use tiberius::Row;
use uuid::Uuid;

const ACQUIRE_SET: &str = "EXEC fence_api.AcquireSet @ResourceKeys = @P1, @Owner = @P2, @LeaseSeconds = @P3";
const RENEW_SET: &str = "EXEC fence_api.RenewSet @Leases = @P1, @Owner = @P2, @LeaseSeconds = @P3";
const RELEASE_SET: &str = "EXEC fence_api.ReleaseSet @Leases = @P1, @Owner = @P2";
const PUBLISH_SET: &str = "EXEC fence_api.PublishSet @Leases = @P1, @Owner = @P2";
const ASSERT_SET: &str = "EXEC fence_api.AssertHolderSet @Leases = @P1, @Owner = @P2";

/// Each `@Leases` procedure's answer to `leases`: AssertHolderSet inside a
/// transaction of its own, rolled back.
async fn every_leases_procedure(
    caller: &mut Caller,
    leases: &str,
    owner: Uuid,
) -> Vec<(&'static str, Result<Vec<Row>, (u32, String)>)> {
    let seconds = 60i32;
    let mut answers = vec![
        ("RenewSet", rows(caller, RENEW_SET, &[&leases, &owner, &seconds]).await),
        ("ReleaseSet", rows(caller, RELEASE_SET, &[&leases, &owner]).await),
        ("PublishSet", rows(caller, PUBLISH_SET, &[&leases, &owner]).await),
    ];
    caller.begin("READ COMMITTED").await.unwrap();
    answers.push(("AssertHolderSet", rows(caller, ASSERT_SET, &[&leases, &owner]).await));
    caller.rollback().await;
    answers
}

#[tokio::test]
async fn loosely_typed_input_to_the_set_procedures_is_refused_with_the_contracts_error() {
    const TEST: &str = "loosely_typed_input_to_the_set_procedures_is_refused_with_the_contracts_error";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let babelfish = db.is_babelfish().await;
    let client = worker(&db.ado()).await;
    let mut caller = Caller::new(db.connect().await);
    let a = provisioned(&client, "a").await;
    let before = state(&client, &a).await;
    let owner = Uuid::new_v4();
    let seconds = 60i32;
    let quoted = serde_json::to_string(&a).unwrap();

    // @ResourceKeys: strings only, never an array of them.
    let nested = format!("[[{quoted}, {quoted}]]");
    let (number, message) = rows(&mut caller, ACQUIRE_SET, &[&nested.as_str(), &owner, &seconds])
        .await
        .expect_err("an array of keys inside the array");
    assert_eq!(number, 50134, "{message}");
    // A character Babelfish cannot hold is refused with the contract's error.
    for (key, what) in [
        ("\\u0000", "U+0000"),
        ("\\ud800", "a lone surrogate"),
        ("\\ud83d\\\\\\ude00", "two halves apart by an escaped backslash"),
    ] {
        let keys = format!("[{quoted}, \"k{key}\"]");
        match rows(&mut caller, ACQUIRE_SET, &[&keys.as_str(), &owner, &seconds]).await {
            Err((number, message)) => assert_eq!(number, 50134, "{what}: {message}"),
            Ok(_) => assert!(!babelfish, "{what} was taken by AcquireSet on Babelfish"),
        }
    }

    let lease = |key: &str, generation: &str, operation: &str, payload: &str| {
        format!(
            "{{\"ResourceKey\": {key}, \"Generation\": {generation}, \"OperationId\": {operation}, \"Payload\": {payload}}}"
        )
    };
    let id = format!("\"{}\"", Uuid::new_v4());
    let good = lease(&quoted, "1", &id, "\"p\"");
    let mut refused = vec![
        (format!("[{}]", lease("5", "1", &id, "\"p\"")), "a key that is a number"),
        (format!("[{}]", lease("true", "1", &id, "\"p\"")), "a key that is true"),
        (
            format!("[{}]", lease(&quoted, "1e1", &id, "\"p\"")),
            "a generation of 1e1",
        ),
        (format!("[[{good}]]"), "an array of leases inside the array"),
    ];
    // Only PublishSet reads these two.
    let publish_only = [
        (
            format!("[{}]", lease(&quoted, "1", &id, "12.50")),
            "a payload that is a number",
        ),
        (
            format!("[{}]", lease(&quoted, "1", "7", "\"p\"")),
            "an operation id that is a number",
        ),
    ];
    if babelfish {
        for (text, what) in [
            ("\\u0000", "U+0000"),
            ("\\udc00", "a lone surrogate"),
            ("\\udc00\\ud800", "two halves in the wrong order"),
        ] {
            refused.push((format!("[{}]", lease(&format!("\"k{text}\""), "1", &id, "\"p\"")), what));
        }
    }
    for (leases, what) in &refused {
        for (procedure, answer) in every_leases_procedure(&mut caller, leases, owner).await {
            let (number, message) = answer.expect_err(&format!("{procedure}: {what}"));
            assert_eq!(number, 50135, "{procedure}: {what}: {message}");
            assert!(message.contains("@Leases"), "{procedure}: {what}: {message}");
        }
    }
    for (leases, what) in &publish_only {
        let (number, message) = rows(&mut caller, PUBLISH_SET, &[&leases.as_str(), &owner])
            .await
            .expect_err(what);
        assert_eq!(number, 50135, "PublishSet: {what}: {message}");
    }
    if babelfish {
        let leases = format!("[{}]", lease(&quoted, "1", &id, "\"p\\u0000\""));
        let (number, message) = rows(&mut caller, PUBLISH_SET, &[&leases.as_str(), &owner])
            .await
            .expect_err("a payload holding U+0000");
        assert_eq!(number, 50135, "PublishSet: {message}");
    }
    assert_eq!(state(&client, &a).await, before, "refused input changed the key");

    // JSON may begin with any whitespace: a tab and a line feed before the
    // array are read as the array, not refused as input (AssertHolderSet
    // then throws that this owner holds nothing).
    let keys = format!("\t\n[{quoted}]");
    let taken = rows(&mut caller, ACQUIRE_SET, &[&keys.as_str(), &owner, &1i32]).await;
    assert!(taken.is_ok(), "AcquireSet of JSON after whitespace: {taken:?}");
    let leases = format!("\r\n\t[{good}]");
    for (procedure, answer) in every_leases_procedure(&mut caller, &leases, Uuid::new_v4()).await {
        assert!(
            !matches!(answer, Err((50135, _))),
            "{procedure} refused JSON after whitespace: {answer:?}"
        );
    }
}
