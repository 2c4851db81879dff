//! The model as oracle: generated schedules of several workers' calls run
//! against the deployed procedures and against `fencepost::model`, and
//! every answer and the final state of every key must agree. A disagreement
//! fails with the shortest schedule proptest's shrinking finds.
//!
//! `FENCEPOST_MODEL_CASES` sets how many schedules run (default
//! [`DEFAULT_CASES`], what CI runs), `FENCEPOST_MODEL_SEED` the seed (a
//! fresh one otherwise); both are printed, so a run can be repeated.

mod run;
mod schedule;
mod server;

use std::cell::RefCell;

use fencepost::deploy::Sources;
use fencepost::model::KeyOrder;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

pub use run::Tally;

use crate::support::TestDatabase;
use crate::support::caller::Caller;

/// Schedules per run unless `FENCEPOST_MODEL_CASES` says otherwise.
pub const DEFAULT_CASES: u32 = 32;
/// The most parts (episodes of a lease, or single steps) in a schedule.
const MAX_PARTS: usize = 8;

/// How many schedules to run, and from which seed.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub cases: u32,
    pub seed: u64,
}

impl Budget {
    /// From `FENCEPOST_MODEL_CASES` and `FENCEPOST_MODEL_SEED`, with
    /// `cases` and a fresh seed where they are not set.
    pub fn from_env(cases: u32) -> Budget {
        let number = |name: &str| {
            std::env::var(name).ok().map(|value| {
                value
                    .trim()
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("{name}={value}: not a number"))
            })
        };
        Budget {
            cases: number("FENCEPOST_MODEL_CASES").map_or(cases, |n| n as u32),
            seed: number("FENCEPOST_MODEL_SEED").unwrap_or_else(rand::random),
        }
    }
}

/// Runs `budget.cases` generated schedules on `db`'s fence (which this
/// empties before each) and on the model. `Ok` holds what ran; `Err` the
/// shortest schedule on which they disagreed, and how.
pub fn check(runtime: &tokio::runtime::Runtime, db: &TestDatabase, budget: Budget) -> Result<Tally, String> {
    eprintln!(
        "model differential: {} schedules from seed {} (FENCEPOST_MODEL_CASES={} FENCEPOST_MODEL_SEED={} repeats it)",
        budget.cases, budget.seed, budget.cases, budget.seed
    );
    let (admin, workers, babelfish) = runtime.block_on(async {
        let mut workers = Vec::new();
        for _ in 0..schedule::WORKERS {
            workers.push(Caller::new(db.connect().await));
        }
        (db.connect().await, workers, db.is_babelfish().await)
    });
    // The engines sort keys apart only where one continues another with a
    // character below a space (docs/engines.md).
    let order = if babelfish {
        KeyOrder::CodePoint
    } else {
        KeyOrder::Padded
    };
    eprintln!("model differential: keys sort as {order:?}");
    let sessions = RefCell::new((admin, workers));
    let tally = RefCell::new(Tally::default());
    let mut seed = [0u8; 32];
    for chunk in seed.chunks_mut(8) {
        chunk.copy_from_slice(&budget.seed.to_le_bytes());
    }
    let config = Config {
        cases: budget.cases,
        failure_persistence: None,
        // Each run of a schedule waits in real time: shrinking is bounded.
        max_shrink_time: 180_000,
        max_shrink_iters: 400,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let result = runner.run(&schedule::schedule(MAX_PARTS), |steps| {
        let (admin, workers) = &mut *sessions.borrow_mut();
        let mut tally = tally.borrow_mut();
        runtime
            .block_on(async {
                crate::support::exec(admin, server::RESET).await;
                run::run(workers, order, &steps, &mut tally).await
            })
            .map_err(TestCaseError::fail)
    });
    let tally = tally.into_inner();
    eprintln!("model differential: {}", tally.summary());
    match result {
        Ok(()) => Ok(tally),
        Err(TestError::Fail(reason, steps)) => Err(format!(
            "the procedures and the model disagree (seed {}); the shortest schedule found, {} steps:\n{steps:#?}\n{reason}",
            budget.seed,
            steps.len()
        )),
        Err(other) => Err(format!("seed {}: {other}", budget.seed)),
    }
}

/// Runs the fixed schedule of [`schedule::set_and_slot_rules`] once on
/// `db`'s fence and on the model: `Ok` holds what ran, `Err` how they
/// disagreed.
pub fn check_set_and_slot_rules(runtime: &tokio::runtime::Runtime, db: &TestDatabase) -> Result<Tally, String> {
    runtime.block_on(async {
        let mut workers = Vec::new();
        for _ in 0..schedule::WORKERS {
            workers.push(Caller::new(db.connect().await));
        }
        let mut admin = db.connect().await;
        let order = if db.is_babelfish().await {
            KeyOrder::CodePoint
        } else {
            KeyOrder::Padded
        };
        crate::support::exec(&mut admin, server::RESET).await;
        let mut tally = Tally::default();
        run::run(&mut workers, order, &schedule::set_and_slot_rules(), &mut tally).await?;
        Ok(tally)
    })
}

/// The shipped sources with `procedure`'s `find` replaced by `replace`
/// (which must occur exactly once, so the mutation is the one described),
/// as `live::selftest_broken` deploys a broken procedure.
pub fn mutant(procedure: &str, find: &str, replace: &str) -> Sources {
    let shipped = Sources::embedded().expect("embedded sources");
    let text = shipped
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == procedure)
        .expect("a shipped procedure")
        .text()
        .to_string();
    assert_eq!(text.matches(find).count(), 1, "{procedure}: {find:?} occurs once");
    shipped
        .with_procedure(&format!("{procedure}.sql"), &text.replacen(find, replace, 1))
        .expect("the mutated procedure")
}
