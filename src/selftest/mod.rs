//! `fencepost selftest`: the behaviours the fence and the client rely on,
//! each forced as a schedule across separate sessions against the user's own
//! deployed fence, and reported as held, failed or skipped (with why).
//!
//! Every check works on keys of its own under a reserved root
//! (`fencepost-selftest:<user prefix><check>`, the user's `--key-prefix`
//! only ever following the root), the same in every run, so repeated runs
//! add no fence row; a key under the root that was there already and holds
//! a publication no selftest wrote is refused, untouched and kept; runs against one
//! database and prefix take turns behind an application lock. Each check
//! releases its leases before the next starts, and leases are at most 30 s,
//! so a check that failed half-way leaves nothing held for long. At the end
//! the run deletes the rows of the keys its checks touched in one
//! transaction when the login may (the database's owner); otherwise they
//! stay for the next run and the report says so. Database-wide
//! commands (Recover, PruneTenure) are never run on the database under test:
//! given a scratch database ([`SelftestOptions::scratch_database`]), the run
//! creates one of its own, deploys the fence there, runs them there, and
//! drops it at the end.

mod check;
mod checks;
mod cleanup;
mod context;
mod engine;
mod error;
mod keys;
mod report;
mod run_lock;
mod scratch;
mod session;
mod waiting;

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

pub use engine::EngineFacts;
pub use error::SelftestError;
pub use report::{CheckReport, Report, Status};
pub use scratch::{SCRATCH_PREFIX, ScratchDatabase};

use crate::client;
use crate::deploy::Sources;
use crate::{Client, ClientConfig, ConnectionString};
use check::Check;
use context::Context;
use keys::Keys;

/// The longest a single check may run; one that does not finish is failed,
/// its sessions closed (which ends any transaction it held open).
pub const CHECK_BOUND: Duration = Duration::from_secs(120);

/// The longest `--key-prefix`, in UTF-16 code units (with the root and the
/// longest check's name, well within a key's 256).
const MAX_PREFIX_UNITS: usize = 128;

pub use keys::KEY_ROOT;

/// What to run and how.
#[derive(Clone, Debug)]
pub struct SelftestOptions {
    key_prefix: String,
    service: Option<ConnectionString>,
    only: Vec<String>,
    interrupt: CancellationToken,
    scratch: Option<Sources>,
}

impl Default for SelftestOptions {
    fn default() -> Self {
        SelftestOptions {
            key_prefix: String::new(),
            service: None,
            only: Vec::new(),
            interrupt: CancellationToken::new(),
            scratch: None,
        }
    }
}

impl SelftestOptions {
    /// What follows [`KEY_ROOT`] in every key the run makes; the check's
    /// name follows it. It never replaces the root: a selftest key is never
    /// one of the user's own.
    pub fn key_prefix(&mut self, prefix: &str) -> &mut Self {
        self.key_prefix = prefix.to_string();
        self
    }

    /// A connection for a login holding only `fence_service`, whose rights
    /// the `service_login_rights` check exercises (skipped without one).
    pub fn service(&mut self, service: ConnectionString) -> &mut Self {
        self.service = Some(service);
        self
    }

    /// Run only the checks named (all when empty).
    pub fn only(&mut self, names: &[String]) -> &mut Self {
        self.only = names.to_vec();
        self
    }

    /// Stops the run when cancelled: the check under way is abandoned (its
    /// sessions closed, which rolls back what they held open) and so is the
    /// making of the scratch database; then the run drops the scratch
    /// database and deletes its rows, within a few seconds.
    pub fn interrupt(&mut self, token: CancellationToken) -> &mut Self {
        self.interrupt = token;
        self
    }

    /// Runs the checks that act on every key of a database (Recover,
    /// PruneTenure) in a scratch database of the run's own: created beside
    /// the database under test as [`SCRATCH_PREFIX`] and the run id (which
    /// needs CREATE DATABASE), given its settings where the engine lets it,
    /// deployed with `sources` by the runner of `fencepost migrate`, and
    /// dropped at the end of the run. Without it those checks are skipped.
    pub fn scratch_database(&mut self, sources: Sources) -> &mut Self {
        self.scratch = Some(sources);
        self
    }
}

/// The name of every check, in the order a run takes them.
pub fn check_names() -> Vec<&'static str> {
    checks::names().collect()
}

/// Something to show while a run goes on.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A check starts.
    Started {
        /// Its name.
        name: &'a str,
        /// Its place in the run, from 1.
        index: usize,
        /// How many checks the run takes.
        of: usize,
    },
    /// A check ended.
    Finished(&'a CheckReport),
    /// The scratch database is about to be created under this name: said
    /// first, so a run stopped at once while it is made can name it.
    ScratchCreating {
        /// Its name.
        name: &'a str,
    },
    /// The scratch database was created and the fence deployed in it; it is
    /// dropped at the end of the run.
    ScratchCreated {
        /// Its name.
        name: &'a str,
    },
    /// The scratch database was dropped, or could not be (the report says why).
    ScratchDropped(&'a ScratchDatabase),
}

/// Runs the checks against the deployed fence of `target`. Refuses with
/// [`SelftestError::NotDeployed`] before running anything when the database
/// does not hold the procedures the client calls.
pub async fn run(
    target: &ConnectionString,
    options: &SelftestOptions,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<Report, SelftestError> {
    let prefix = options.key_prefix.trim();
    // A key is nvarchar(256): 256 UTF-16 code units, so a character
    // outside the Basic Multilingual Plane counts twice.
    if prefix.encode_utf16().count() > MAX_PREFIX_UNITS {
        return Err(SelftestError::InvalidPrefix {
            prefix: options.key_prefix.clone(),
            reason: "at most 128 UTF-16 code units (a character outside the Basic Multilingual Plane counts \
                     as two), so the run's keys stay within the 256 a key may have",
        });
    }
    let selected: Vec<&'static Check> = checks::ALL
        .iter()
        .filter(|c| options.only.is_empty() || options.only.iter().any(|n| n == c.name))
        .collect();
    if let Some(unknown) = options.only.iter().find(|n| !checks::names().any(|c| c == n.as_str())) {
        return Err(SelftestError::UnknownCheck {
            name: unknown.clone(),
            known: check_names().join(", "),
        });
    }
    let mut admin = target.connect().await?;
    // Held by `admin`'s session until the run ends.
    let keys = Keys::new(prefix);
    run_lock::take(&mut admin, keys.prefix()).await?;
    let engine = engine::read(&mut admin).await.map_err(SelftestError::Settings)?;
    verify_deployed(target).await?;
    let ctx = Context {
        target: target.clone(),
        service: options.service.clone(),
        engine,
        keys,
    };
    let mut reports = Vec::with_capacity(selected.len());
    let mut not_run = Vec::new();
    let mut scratch = ScratchState::new(options.scratch.as_ref());
    let stop = &options.interrupt;
    for (i, check) in selected.iter().enumerate() {
        let not_from_here = || selected[i..].iter().map(|c| c.name.to_string()).collect();
        if stop.is_cancelled() {
            not_run = not_from_here();
            break;
        }
        // The scratch database is made before the first check that needs
        // it, so its making is no check's time, and a run that needs none
        // makes none.
        let scratch_ctx = if checks::is_database_wide(check) {
            Some(scratch.ready(&ctx, events, stop).await)
        } else {
            None
        };
        // A stop while the scratch database was made starts no check.
        if stop.is_cancelled() {
            not_run = not_from_here();
            break;
        }
        events(Event::Started {
            name: check.name,
            index: i + 1,
            of: selected.len(),
        });
        let report = match scratch_ctx {
            None => run_one(&ctx, check, stop).await,
            Some(Ok(scratch_ctx)) => run_one(scratch_ctx, check, stop).await,
            Some(Err(why)) => Some(not_made(check, why)),
        };
        let Some(report) = report else {
            // Stopped while it ran: abandoned, its sessions closed.
            not_run = not_from_here();
            break;
        };
        events(Event::Finished(&report));
        reports.push(report);
    }
    // Once stopped, what is left to do is bounded to end well before a
    // second signal (a cancelled CI job's SIGKILL) comes.
    let stopped = stop.is_cancelled();
    let (drop_bound, cleanup_bound) = if stopped {
        (scratch::STOPPED_DROP_BOUND, cleanup::STOPPED_CLEANUP_BOUND)
    } else {
        (scratch::DROP_BOUND, cleanup::CLEANUP_BOUND)
    };
    let scratch_database = scratch.remove(&ctx.engine, drop_bound).await;
    if let Some(dropped) = &scratch_database {
        events(Event::ScratchDropped(dropped));
    }
    let cleanup = cleanup::delete_run_rows(&mut admin, &ctx.keys, cleanup_bound).await;
    Ok(Report {
        engine: ctx.engine,
        key_root: ctx.keys.prefix().to_string(),
        left_behind: cleanup.said,
        rows_left: cleanup.left,
        checks: reports,
        // Stopped before a check the run was asked for had run; a stop
        // after the last check ended changes nothing of the run's result.
        interrupted: !not_run.is_empty(),
        not_run,
        scratch_database,
    })
}

/// The scratch database over a run: not asked for, not made yet, made (a
/// context of its own for the checks that run there), or not to be had.
enum ScratchState<'a> {
    NotAsked,
    ToMake(&'a Sources),
    Made(Box<scratch::Scratch>, Box<Context>),
    NotMade(String),
    /// Stopped while it was made, and dropped again (or not: it says).
    Stopped(ScratchDatabase),
}

impl<'a> ScratchState<'a> {
    fn new(sources: Option<&'a Sources>) -> Self {
        match sources {
            None => ScratchState::NotAsked,
            Some(sources) => ScratchState::ToMake(sources),
        }
    }

    /// The scratch database's context, made at the first call; or why the
    /// checks that need it cannot run.
    async fn ready(
        &mut self,
        ctx: &Context,
        events: &mut dyn FnMut(Event<'_>),
        stop: &CancellationToken,
    ) -> Result<&Context, String> {
        if let ScratchState::ToMake(sources) = self {
            let name = scratch::name(&ctx.keys.run);
            events(Event::ScratchCreating { name: &name });
            *self = match scratch::create_unless_stopped(&ctx.target, &ctx.engine, &name, sources, stop).await {
                scratch::Created::Made(made) => {
                    events(Event::ScratchCreated {
                        name: &made.report.name,
                    });
                    let scratch_ctx = Context {
                        target: made.target.clone(),
                        service: None,
                        engine: made.report.engine.clone(),
                        keys: ctx.keys.clone(),
                    };
                    ScratchState::Made(made, Box::new(scratch_ctx))
                }
                scratch::Created::NotMade(scratch::NotMade(why)) => ScratchState::NotMade(why),
                scratch::Created::Stopped(left) => ScratchState::Stopped(left),
            };
        }
        match self {
            ScratchState::Made(_, scratch_ctx) => Ok(scratch_ctx),
            ScratchState::NotMade(why) => Err(why.clone()),
            ScratchState::Stopped(left) => Err(left.outcome.clone()),
            ScratchState::NotAsked | ScratchState::ToMake(_) => Err(checks::NOT_ASKED.to_string()),
        }
    }

    /// Drops the scratch database, if the run made one, within `bound`.
    async fn remove(self, facts: &EngineFacts, bound: Duration) -> Option<ScratchDatabase> {
        match self {
            ScratchState::Made(made, scratch_ctx) => {
                // Its sessions and clients are the checks', all closed by
                // now; the context holds none.
                drop(scratch_ctx);
                Some(made.remove(facts, bound).await)
            }
            ScratchState::Stopped(left) => Some(left),
            _ => None,
        }
    }
}

/// The entry of a check that needed the scratch database and had none.
fn not_made(check: &'static Check, why: String) -> CheckReport {
    CheckReport {
        name: check.name.to_string(),
        behaviour: check.behaviour.to_string(),
        document: check.document.to_string(),
        expected: check.expected.to_string(),
        seen: why,
        status: Status::Skipped,
        elapsed_ms: 0,
    }
}

/// Runs `check`, or abandons it when `stop` is cancelled while it runs
/// (`None`): its task is aborted, which closes its sessions, and the server
/// rolls back whatever they held open.
async fn run_one(ctx: &Context, check: &'static Check, stop: &CancellationToken) -> Option<CheckReport> {
    let started = Instant::now();
    // A task of its own, so a check that panics is a failed check and the
    // run still drops its scratch database and deletes its rows.
    let owned = ctx.clone();
    let schedule = check.run;
    let task = tokio::spawn(async move { schedule(&owned).await });
    let abort = task.abort_handle();
    let ran = tokio::select! {
        biased;
        () = stop.cancelled() => None,
        ran = tokio::time::timeout(CHECK_BOUND, task) => Some(ran),
    };
    let Some(ran) = ran else {
        abort.abort();
        return None;
    };
    let verdict = match ran {
        Ok(Ok(Ok(verdict))) => verdict,
        Ok(Ok(Err(error))) => check::Verdict::judge(false, format!("the schedule could not finish: {error:#}")),
        Ok(Err(error)) => check::Verdict::judge(false, format!("the schedule ended abnormally: {error}")),
        Err(_) => {
            // Its sessions close with it, which ends any transaction it held.
            abort.abort();
            check::Verdict::judge(false, format!("did not finish within {} s", CHECK_BOUND.as_secs()))
        }
    };
    Some(CheckReport {
        name: check.name.to_string(),
        behaviour: check.behaviour.to_string(),
        document: check.document.to_string(),
        expected: verdict.expected.unwrap_or_else(|| check.expected.to_string()),
        seen: verdict.seen,
        status: verdict.status,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// The procedures the checks call are there, with the parameters they pass.
async fn verify_deployed(target: &ConnectionString) -> Result<(), SelftestError> {
    let mut config = ClientConfig::new(target.clone());
    config.max_connections(1).allow_privileged_login(true);
    let client = Client::connect_with(config)
        .await
        .map_err(|source| SelftestError::Client {
            what: "connecting".to_string(),
            source,
        })?;
    match client.verify_contract().await {
        Ok(()) => Ok(()),
        Err(client::Error::ContractMismatch { problems, .. }) => Err(SelftestError::NotDeployed { problems }),
        Err(source) => Err(SelftestError::Client {
            what: "checking the fence contract".to_string(),
            source,
        }),
    }
}
