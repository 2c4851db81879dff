//! Generated input, straight to each procedure and through the client. Every
//! call ends in a contract outcome or a documented refusal (50101–50107, or the
//! client's typed error), never anything else, and a refused call changes
//! nothing.

use crate::support;

use std::time::Duration;

use fencepost::Connection;
use fencepost::client::{Error, Publish};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use support::TestDatabase;
use support::lease::{acquired, worker};
use uuid::Uuid;

/// The lease every generated call may aim at, so that valid calls reach the
/// procedures' real decisions and not only their input checks.
#[derive(Clone, Debug)]
struct Target {
    key: String,
    owner: Uuid,
    generation: i64,
    operation: Uuid,
}

#[derive(Clone, Debug)]
enum Arg {
    Text(Option<String>),
    Id(Option<Uuid>),
    Int(Option<i32>),
    Big(Option<i64>),
}

/// A generated call: procedure and arguments in contract order.
#[derive(Clone, Debug)]
struct Call {
    procedure: &'static str,
    parameters: &'static [&'static str],
    args: Vec<Arg>,
}

impl Call {
    /// The outcomes the contract allows this procedure.
    fn outcomes(&self) -> &'static [&'static str] {
        match self.procedure {
            "fence_api.Provision" => &["Created", "Exists"],
            "fence_api.Acquire" => &["Acquired", "Busy", "NotProvisioned"],
            "fence_api.Renew" => &["Renewed", "Lost"],
            "fence_api.Publish" => &[
                "Published",
                "AlreadyPublished",
                "Superseded",
                "Expired",
                "GenerationAlreadyPublished",
                "NotProvisioned",
            ],
            "fence_api.Release" => &["Released", "NotHolder"],
            "fence_api.GetOutcome" => &["Published", "Unknown"],
            "fence_api.ReadPublication" | "fence_api.Inspect" => &["Found", "NotProvisioned"],
            "fence_admin.ForceRelease" => &["Fenced", "NotProvisioned"],
            other => panic!("no contract for {other}"),
        }
    }

    /// The documented numbers of the arguments this call gets wrong, by the
    /// rules of the contract's input table; empty when every argument is valid.
    fn invalid(&self) -> Vec<u32> {
        self.parameters
            .iter()
            .zip(&self.args)
            .filter_map(|(name, arg)| match (*name, arg) {
                ("@ResourceKey", Arg::Text(key)) => {
                    let valid = key
                        .as_deref()
                        .is_some_and(|k| (1..=256).contains(&k.encode_utf16().count()) && !k.ends_with(' '));
                    (!valid).then_some(50101)
                }
                ("@Owner", Arg::Id(owner)) => owner.is_none_or(|o| o.is_nil()).then_some(50102),
                ("@LeaseSeconds", Arg::Int(seconds)) => {
                    seconds.is_none_or(|s| !(1..=86_400).contains(&s)).then_some(50103)
                }
                ("@Generation", Arg::Big(generation)) => generation.is_none_or(|g| g < 1).then_some(50104),
                ("@OperationId", Arg::Id(operation)) => operation.is_none_or(|o| o.is_nil()).then_some(50105),
                ("@Payload", Arg::Text(payload)) => payload.is_none().then_some(50106),
                (name, arg) => panic!("no rule for {name} = {arg:?}"),
            })
            .collect()
    }

    /// The error numbers this call may be refused with: one of its invalid
    /// arguments' (the contract does not order the checks); with every
    /// argument valid, only a publish's 50107 (an operation id already used
    /// by a publish to another resource or generation), decided by the data.
    fn allowed_errors(&self) -> Vec<u32> {
        let invalid = self.invalid();
        if invalid.is_empty() && self.procedure == "fence_api.Publish" {
            vec![50107]
        } else {
            invalid
        }
    }

    /// The EXEC, with NULL arguments written as literals: Babelfish refuses
    /// untyped NULL string parameters.
    fn statement(&self) -> String {
        let mut bound = 0;
        let arguments: Vec<String> = self
            .parameters
            .iter()
            .zip(&self.args)
            .map(|(name, arg)| {
                let null = matches!(arg, Arg::Text(None) | Arg::Id(None) | Arg::Int(None) | Arg::Big(None));
                if null {
                    format!("{name} = NULL")
                } else {
                    bound += 1;
                    format!("{name} = @P{bound}")
                }
            })
            .collect();
        format!("EXEC {} {}", self.procedure, arguments.join(", "))
    }
}

fn key(own: String) -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some(own.clone())),
        Just(Some(own.to_uppercase())),
        Just(Some(format!("{own} "))),
        Just(Some(String::new())),
        Just(Some("😀".repeat(128))),
        Just(Some(format!("{}k", "😀".repeat(128)))),
        Just(Some("k".repeat(257))),
        "\\PC{0,300}".prop_map(Some),
        "[a-z ]{0,8}".prop_map(Some),
    ]
}

fn id(known: Uuid) -> impl Strategy<Value = Option<Uuid>> {
    prop_oneof![
        Just(None),
        Just(Some(Uuid::nil())),
        Just(Some(known)),
        any::<u128>().prop_map(|n| Some(Uuid::from_u128(n))),
    ]
}

fn seconds() -> impl Strategy<Value = Option<i32>> {
    prop_oneof![Just(None), any::<i32>().prop_map(Some), (1..=5).prop_map(Some)]
}

fn generation(known: i64) -> impl Strategy<Value = Option<i64>> {
    prop_oneof![Just(None), Just(Some(known)), any::<i64>().prop_map(Some)]
}

fn payload() -> impl Strategy<Value = Option<String>> {
    prop_oneof![Just(None), "\\PC{0,40}".prop_map(Some)]
}

fn call(target: &Target) -> impl Strategy<Value = Call> {
    use Arg::*;
    let t = target.clone();
    let k = || key(t.key.clone()).prop_map(Text);
    let owner = || id(t.owner).prop_map(Id);
    let operation = || id(t.operation).prop_map(Id);
    let gen_ = || generation(t.generation).prop_map(Big);
    let secs = || seconds().prop_map(Int);
    let make = |procedure: &'static str, parameters: &'static [&'static str]| {
        move |args: Vec<Arg>| Call {
            procedure,
            parameters,
            args,
        }
    };
    prop_oneof![
        k().prop_map(|a| vec![a])
            .prop_map(make("fence_api.Provision", &["@ResourceKey"])),
        (k(), owner(), secs())
            .prop_map(|(a, b, c)| vec![a, b, c])
            .prop_map(make("fence_api.Acquire", &["@ResourceKey", "@Owner", "@LeaseSeconds"])),
        (k(), owner(), gen_(), secs())
            .prop_map(|(a, b, c, d)| vec![a, b, c, d])
            .prop_map(make(
                "fence_api.Renew",
                &["@ResourceKey", "@Owner", "@Generation", "@LeaseSeconds"]
            )),
        (k(), owner(), gen_(), operation(), payload().prop_map(Text))
            .prop_map(|(a, b, c, d, e)| vec![a, b, c, d, e])
            .prop_map(make(
                "fence_api.Publish",
                &["@ResourceKey", "@Owner", "@Generation", "@OperationId", "@Payload"]
            )),
        (k(), owner(), gen_())
            .prop_map(|(a, b, c)| vec![a, b, c])
            .prop_map(make("fence_api.Release", &["@ResourceKey", "@Owner", "@Generation"])),
        operation()
            .prop_map(|a| vec![a])
            .prop_map(make("fence_api.GetOutcome", &["@OperationId"])),
        k().prop_map(|a| vec![a])
            .prop_map(make("fence_api.ReadPublication", &["@ResourceKey"])),
        k().prop_map(|a| vec![a])
            .prop_map(make("fence_api.Inspect", &["@ResourceKey"])),
        k().prop_map(|a| vec![a])
            .prop_map(make("fence_admin.ForceRelease", &["@ResourceKey"])),
    ]
}

/// Everything the procedures can change, as text.
async fn tables(conn: &mut Connection) -> String {
    let sets = conn
        .simple_query(
            "SELECT ResourceKey, Generation, Owner, LeaseUntilUtc, PublishedGeneration, Payload, PublishedAtUtc
               FROM fence.Resource ORDER BY CAST(ResourceKey AS varbinary(600));
             SELECT OperationId, ResourceKey, Generation, PublishedAtUtc
               FROM fence.PublishedOperation ORDER BY OperationId;",
        )
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    format!("{sets:?}")
}

async fn run_raw(conn: &mut Connection, call: &Call) -> Result<(), TestCaseError> {
    let before = tables(conn).await;
    let params: Vec<&dyn tiberius::ToSql> = call
        .args
        .iter()
        .filter_map(|arg| match arg {
            Arg::Text(Some(v)) => Some(v as &dyn tiberius::ToSql),
            Arg::Id(Some(v)) => Some(v as &dyn tiberius::ToSql),
            Arg::Int(Some(v)) => Some(v as &dyn tiberius::ToSql),
            Arg::Big(Some(v)) => Some(v as &dyn tiberius::ToSql),
            _ => None,
        })
        .collect();
    let statement = call.statement();
    let result = match conn.query(&statement, &params).await {
        Ok(stream) => stream.into_results().await,
        Err(e) => Err(e),
    };
    let (outcomes, invalid, numbers) = (call.outcomes(), call.invalid(), call.allowed_errors());
    match result {
        Ok(sets) => {
            let rows: Vec<_> = sets.into_iter().flatten().collect();
            prop_assert_eq!(rows.len(), 1, "{}: not exactly one row", statement);
            let outcome = rows[0].get::<&str, _>(0).unwrap_or("<NULL>");
            prop_assert!(
                invalid.is_empty(),
                "{}: {:?} answered {} instead of refusing {:?}",
                statement,
                call.args,
                outcome,
                invalid
            );
            prop_assert!(outcomes.contains(&outcome), "{}: outcome {}", statement, outcome);
        }
        Err(tiberius::error::Error::Server(token)) => {
            prop_assert!(
                numbers.contains(&token.code()),
                "{}: {:?}: error {} {}, expected one of {:?}",
                statement,
                call.args,
                token.code(),
                token.message(),
                numbers
            );
            prop_assert_eq!(
                tables(conn).await,
                before,
                "{}: a refused call changed the tables",
                statement
            );
            // The refusal rolled back the procedure's own transaction and left none open.
            let open = conn
                .simple_query("SELECT @@TRANCOUNT")
                .await
                .unwrap()
                .into_row()
                .await
                .unwrap();
            prop_assert_eq!(open.and_then(|r| r.get::<i32, _>(0)), Some(0));
        }
        Err(other) => return Err(TestCaseError::fail(format!("{statement}: {other}"))),
    }
    Ok(())
}

#[test]
fn generated_calls_to_each_procedure_end_in_an_outcome_or_a_documented_refusal() {
    let test = "generated_calls_to_each_procedure_end_in_an_outcome_or_a_documented_refusal";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = runtime.block_on(TestDatabase::deployed(test)) else {
        return;
    };
    let (target, conn) = runtime.block_on(async {
        let client = support::lease::unwarmed(&db.ado()).await;
        let key = support::lease::provisioned(&client, "generated").await;
        let lease = acquired(client.acquire(&key, Duration::from_secs(600)).await.unwrap());
        let operation = Uuid::new_v4();
        assert_eq!(
            client.publish(&lease, operation, "first").await.unwrap(),
            Publish::Published
        );
        let target = Target {
            key,
            owner: lease.owner(),
            generation: lease.generation(),
            operation,
        };
        (target, db.connect().await)
    });
    let mut runner = TestRunner::new(Config {
        cases: 160,
        failure_persistence: None,
        ..Config::default()
    });
    // The runner takes a shared closure; the one connection is lent to each case in turn.
    let conn = tokio::sync::Mutex::new(conn);
    let result = runner.run(&call(&target), |call| {
        runtime.block_on(async { run_raw(&mut *conn.lock().await, &call).await })
    });
    drop(conn);
    runtime.block_on(db.drop());
    result.unwrap();
}

#[test]
fn generated_calls_through_the_client_end_in_an_outcome_or_a_typed_refusal() {
    let test = "generated_calls_through_the_client_end_in_an_outcome_or_a_typed_refusal";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = runtime.block_on(TestDatabase::deployed(test)) else {
        return;
    };
    let (client, lease, target, conn) = runtime.block_on(async {
        let client = worker(&db.ado()).await;
        let key = support::lease::provisioned(&client, "generated").await;
        let lease = acquired(client.acquire(&key, Duration::from_secs(600)).await.unwrap());
        let target = Target {
            key,
            owner: lease.owner(),
            generation: lease.generation(),
            operation: Uuid::new_v4(),
        };
        let conn = db.connect().await;
        (client, lease, target, conn)
    });
    let strategy = (
        key(target.key.clone()),
        id(target.owner),
        0u64..90_000,
        prop::bool::ANY,
        id(target.operation),
        payload(),
        0usize..6,
    );
    let mut runner = TestRunner::new(Config {
        cases: 160,
        failure_persistence: None,
        ..Config::default()
    });
    let conn = tokio::sync::Mutex::new(conn);
    let result = runner.run(&strategy, |(key, owner, millis, whole, operation, payload, which)| {
        runtime.block_on(async {
            let mut conn = conn.lock().await;
            let key = key.unwrap_or_default();
            let owner = owner.unwrap_or_default();
            let operation = operation.unwrap_or_default();
            let payload = payload.unwrap_or_default();
            let length = if whole {
                Duration::from_secs(millis / 1000)
            } else {
                Duration::from_millis(millis)
            };
            let before = tables(&mut conn).await;
            let result: Result<(), Error> = match which {
                0 => client.provision(&key).await.map(drop),
                1 => client.acquire_as(&key, owner, length).await.map(drop),
                2 => client.inspect(&key).await.map(drop),
                3 => client.read_publication(&key).await.map(drop),
                4 => client.outcome(operation).await.map(drop),
                _ => client.publish(&lease, operation, &payload).await.map(drop),
            };
            match result {
                Ok(()) => Ok(()),
                Err(Error::InvalidInput { .. } | Error::Rejected { .. }) => {
                    prop_assert_eq!(tables(&mut conn).await, before, "a refused call changed the tables");
                    Ok(())
                }
                Err(other) => Err(TestCaseError::fail(format!("case {which}: {other:?}"))),
            }
        })
    });
    drop((client, conn));
    runtime.block_on(db.drop());
    result.unwrap();
}
