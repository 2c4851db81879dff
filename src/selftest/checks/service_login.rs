//! What a login holding only `fence_service` may do: the whole cycle through
//! the procedures, and nothing past them.

use anyhow::Result;
use uuid::Uuid;

use crate::client::{Publish, Release};
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, acquired};
use crate::selftest::session::{INSPECT, Session};
use crate::{Client, ClientConfig};

pub(crate) const CHECK: Check = Check {
    name: "service_login_rights",
    behaviour: "as the --service-connection login: verify_contract, the whole cycle, an Inspect inside its own \
                transaction; then a direct read and write of fence.Resource and a call of fence_admin.ForceRelease",
    document: "engines.md ownership row; B13; contract: Roles",
    expected: "verify_contract passes (the login cannot write the fence directly); Created or Exists, Acquired, \
               Published, Released; Inspect Found inside a transaction; the direct read, the direct write and \
               ForceRelease refused",
    run: |ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &Context) -> Result<Verdict> {
    let Some(service) = &ctx.service else {
        return Ok(Verdict::skipped(
            "no --service-connection given: pass a connection string for a login holding only fence_service",
        ));
    };
    let mut config = ClientConfig::new(service.clone());
    config.max_connections(1);
    let client = Client::connect_with(config).await?;
    let mut seen = Vec::new();
    let verified = client.verify_contract().await;
    seen.push(match &verified {
        Ok(()) => "verify_contract passed".to_string(),
        Err(e) => format!("verify_contract: {e}"),
    });
    let key = ctx.keys.name("service");
    let cycle = cycle(ctx, &client).await;
    seen.push(match &cycle {
        Ok(steps) => steps.clone(),
        Err(e) => format!("cycle failed: {e:#}"),
    });
    let mut session = Session::open(service).await?;
    // Refusals prove nothing if the service login landed in another database.
    let same_database = session
        .int(&format!(
            "SELECT CASE WHEN DB_NAME() = N'{}' THEN 1 ELSE 0 END;",
            ctx.engine.database.replace('\'', "''")
        ))
        .await?
        == Some(1);
    if !same_database {
        return Ok(Verdict::judge(
            false,
            format!(
                "the --service-connection session is not in the database under test ({}): name it in the \
                 connection string (Database=...)",
                ctx.engine.database
            ),
        ));
    }
    session.batch("BEGIN TRANSACTION;").await?;
    let inspect = session.call(INSPECT, &[&key.as_str()]).await?.outcome();
    session.rollback().await;
    seen.push(format!("Inspect in a transaction {inspect}"));
    let read = session.batch("SELECT TOP (1) ResourceKey FROM fence.Resource;").await;
    let write = session
        .batch("UPDATE fence.Resource SET Generation = Generation WHERE 1 = 0;")
        .await;
    let force = session
        .batch(&format!(
            "EXEC fence_admin.ForceRelease @ResourceKey = N'{}', @OperationId = '{}';",
            key.replace('\'', "''"),
            Uuid::new_v4()
        ))
        .await;
    let word = |r: &Result<(), tiberius::error::Error>| match r {
        Ok(()) => "ALLOWED".to_string(),
        Err(e) if permission_denied(e) => format!("refused ({e})"),
        Err(e) => format!("failed, but not refused for want of permission ({e})"),
    };
    let refused = |r: &Result<(), tiberius::error::Error>| matches!(r, Err(e) if permission_denied(e));
    seen.push(format!(
        "direct read {}; direct write {}; ForceRelease {}",
        word(&read),
        word(&write),
        word(&force)
    ));
    let held =
        verified.is_ok() && cycle.is_ok() && inspect == "Found" && refused(&read) && refused(&write) && refused(&force);
    let verdict = Verdict::judge(held, seen.join("; "));
    // The script fixes one failure: the procedures refused the service's
    // own calls for want of rights, as Babelfish does without ownership chaining.
    let calls_refused = matches!(&cycle, Err(e) if format!("{e:#}").to_lowercase().contains("permission denied"));
    Ok(if ctx.engine.babelfish && calls_refused {
        Verdict {
            seen: format!(
                "{}; Babelfish does not chain ownership: run the script of `fencepost script --target \
                 babelfish-postgres` after each migrate (docs/engines.md, Least privilege on Babelfish)",
                verdict.seen
            ),
            ..verdict
        }
    } else {
        verdict
    })
}

async fn cycle(ctx: &Context, client: &Client) -> Result<String> {
    // Provisioned, refused when not the selftest's, and free of a lease a
    // stopped run left on it.
    let key = ctx.key(client, "service").await?;
    let lease = acquired(client.acquire(&key, LONG).await?)?;
    let publish = client
        .publish(&lease, Uuid::new_v4(), &ctx.keys.payload("from the service login"))
        .await?;
    let release = client.release(&lease).await?;
    anyhow::ensure!(
        publish == Publish::Published && release == Release::Released,
        "publish {publish:?}, release {release:?}"
    );
    Ok(format!("Provisioned, Acquired, {publish:?}, {release:?}"))
}

/// A refusal for want of permission: 229 (object) or 230 (column) on SQL
/// Server; Babelfish passes PostgreSQL's "permission denied" through.
fn permission_denied(error: &tiberius::error::Error) -> bool {
    match error {
        tiberius::error::Error::Server(token) => {
            matches!(token.code(), 229 | 230) || token.message().to_lowercase().contains("permission denied")
        }
        _ => false,
    }
}
