//! Layouts Babelfish cannot make: a test of one asks the engine first, on an
//! empty database, and skips without paying for a deploy when Babelfish
//! refuses the layout's statement with one of the refusals the test lists,
//! word for word. On any other engine, or any other answer, the test gets a
//! deployed database and makes the layout in full.

use std::io::Write;

use fencepost::deploy::Sources;

use super::{TestDatabase, skip, user_of};

/// A refusal as Babelfish answers it: its error code and the whole message.
/// `{db}` in a message stands for the test database's name.
pub type Refusal = (u32, &'static str);

/// Runs `sql` on a connection of its own.
pub async fn run(db: &TestDatabase, sql: &str) -> Result<(), tiberius::error::Error> {
    let mut conn = db.connect().await;
    match conn.simple_query(sql).await {
        Ok(stream) => stream.into_results().await.map(drop),
        Err(e) => Err(e),
    }
}

/// Whether `e` is one of `refusals` for `db`, code and message exactly.
pub fn is_known(refusals: &[Refusal], db: &TestDatabase, e: &tiberius::error::Error) -> bool {
    let tiberius::error::Error::Server(token) = e else {
        return false;
    };
    refusals
        .iter()
        .any(|(code, message)| token.code() == *code && token.message() == message.replace("{db}", &db.name))
}

/// A deployed database for `test`, unless the engine is Babelfish and
/// refuses `probe` (the layout's statement, its names standing alone) on an
/// empty database with one of `refusals`: then `test` reports the skip and
/// gets `None`.
pub async fn deployed_unless_refused(test: &str, refusals: &[Refusal], probe: &str) -> Option<TestDatabase> {
    deployed_unless(test, refusals, false, |_| probe.to_string()).await
}

/// As [`deployed_unless_refused`], for a layout that names a user: Babelfish
/// looks for the member before the role, so the probe (built from the name
/// of a user made for it) needs a real one.
pub async fn deployed_unless_refused_by_a_user(
    test: &str,
    refusals: &[Refusal],
    probe: impl FnOnce(&str) -> String,
) -> Option<TestDatabase> {
    deployed_unless(test, refusals, true, probe).await
}

async fn deployed_unless(
    test: &str,
    refusals: &[Refusal],
    needs_user: bool,
    probe: impl FnOnce(&str) -> String,
) -> Option<TestDatabase> {
    let mut bare = TestDatabase::new(test).await?;
    if !bare.is_babelfish().await {
        bare.migrate(&Sources::embedded().expect("embedded sources"))
            .await
            .expect("first deploy");
        return Some(bare);
    }
    let user = if needs_user {
        user_of(&bare.login_in_role(None).await)
    } else {
        String::new()
    };
    let probe = probe(&user);
    match run(&bare, &probe).await {
        Err(e) if is_known(refusals, &bare, &e) => {
            skip(test, &format!("Babelfish refuses `{probe}`, before any deploy: {e}"));
            bare.drop().await;
            None
        }
        // Made, or refused otherwise: the test makes the layout itself, on
        // a database that holds nothing of the probe's.
        outcome => {
            if let Err(e) = outcome {
                let _ = writeln!(
                    std::io::stderr(),
                    "{test}: the probe `{probe}` was refused otherwise ({e}): deploying"
                );
            }
            bare.drop().await;
            TestDatabase::deployed(test).await
        }
    }
}
