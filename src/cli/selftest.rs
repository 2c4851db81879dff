//! `fencepost selftest`.

use anyhow::{Context, Result};
use fencepost::ConnectionString;
use fencepost::selftest::{self, Event, SelftestOptions, Status};

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use super::opt::{CheckFormat, SelftestArgs};
use super::{EXIT_ATTENTION, EXIT_OK, connection_string, sources};

/// The exit of a run stopped by Ctrl-C: 128 + SIGINT, as a shell reports a
/// process SIGINT ended, so a pipeline never takes a cut-short run for a pass
/// (SIGTERM: 143).
const EXIT_INTERRUPTED: u8 = 130;

pub async fn run(args: SelftestArgs) -> Result<u8> {
    if args.list {
        let mut names = selftest::check_names().join("\n");
        names.push('\n');
        super::out::print(&names)?;
        return Ok(EXIT_OK);
    }
    let mut target = connection_string(&args.connect)?;
    target.set_application_name("fencepost selftest");
    let mut options = SelftestOptions::default();
    options.key_prefix(&args.key_prefix).only(&args.checks);
    if let Some(ado) = args.service_connection.as_deref().filter(|a| !a.trim().is_empty()) {
        let mut service = ConnectionString::parse(ado).context("--service-connection")?;
        service.set_application_name("fencepost selftest");
        options.service(service);
    }
    if args.scratch_database {
        options.scratch_database(sources(args.source_dir.as_deref())?);
    }
    // The scratch database from just before it is created until it is
    // dropped, for a second signal to name.
    let scratch: Arc<Mutex<Option<String>>> = Arc::default();
    // Ctrl-C (or SIGTERM: a service manager's stop, a cancelled CI job)
    // abandons the check under way (its sessions closed, which rolls back
    // what they held) or the making of the scratch database; the run still
    // drops its scratch database and deletes its keys, within seconds, so
    // it is done before a cancelled CI job's SIGKILL. Once tokio listens for a signal it keeps it from
    // ending the process, so a second one is heard here and ends it at once.
    let interrupt = tokio_util::sync::CancellationToken::new();
    options.interrupt(interrupt.clone());
    let exit_on_stop = Arc::new(AtomicU8::new(EXIT_INTERRUPTED));
    let left = Arc::clone(&scratch);
    let stop_code = Arc::clone(&exit_on_stop);
    tokio::spawn(async move {
        let mut signals = match Stops::listen() {
            Ok(signals) => signals,
            Err(e) => {
                super::progress(format_args!("selftest: cannot listen for Ctrl-C or SIGTERM: {e}"));
                return;
            }
        };
        let Some(code) = signals.next().await else {
            return;
        };
        stop_code.store(code, Ordering::SeqCst);
        super::progress(format_args!(
            "selftest: stopping: the check under way is abandoned, then the scratch database is dropped and the \
             run's rows deleted (Ctrl-C again to stop now, leaving them)"
        ));
        interrupt.cancel();
        if signals.next().await.is_some() {
            eprintln!("fencepost: selftest: stopped at once; the run's rows stay under its key prefix");
            if let Some(name) = left.lock().ok().and_then(|name| name.clone()) {
                eprintln!(
                    "fencepost: selftest: the scratch database {name} may remain: if it does, drop it yourself: \
                     DROP DATABASE [{name}];"
                );
            }
            std::process::exit(i32::from(code));
        }
    });
    let mut on_event = |event: Event<'_>| match event {
        Event::Started { name, index, of } => super::progress(format_args!("selftest: [{index}/{of}] {name} ...")),
        Event::Finished(check) => super::progress(format_args!(
            "selftest: {} {}{}",
            check.status.word(),
            check.name,
            match check.status {
                Status::Passed => String::new(),
                _ => format!(": {}", check.seen),
            }
        )),
        Event::ScratchCreating { name } => {
            if let Ok(mut left) = scratch.lock() {
                *left = Some(name.to_string());
            }
            super::progress(format_args!("selftest: creating the scratch database {name}"));
        }
        Event::ScratchCreated { name } => {
            super::progress(format_args!(
                "selftest: created the scratch database {name} and deployed the fence there (dropped at the end)"
            ));
        }
        Event::ScratchDropped(dropped) => {
            if dropped.dropped {
                if let Ok(mut left) = scratch.lock() {
                    *left = None;
                }
                super::progress(format_args!("selftest: dropped the scratch database {}", dropped.name));
            } else {
                // Said even with -q: something is left for the user to drop.
                eprintln!(
                    "fencepost: selftest: the scratch database {}: {}",
                    dropped.name, dropped.outcome
                );
            }
        }
        _ => {}
    };
    let report = selftest::run(&target, &options, &mut on_event).await?;
    let text = match args.format {
        CheckFormat::Text => report.to_text(),
        CheckFormat::Json => report.to_json(),
        CheckFormat::Junit => report.to_junit(),
    };
    // The exit is the run's, worked out before the report is written: a
    // reader that leaves early must not turn a failed or stopped run into 0.
    let code = if report.interrupted {
        eprintln!(
            "fencepost: selftest: interrupted; {} check(s) not run: {} (the report covers only the checks that ran)",
            report.not_run.len(),
            report.not_run.join(", ")
        );
        // Said even with -q: something is left for the user to remove.
        for left in report.left_behind_by_the_run() {
            eprintln!("fencepost: selftest: left behind: {left}");
        }
        exit_on_stop.load(Ordering::SeqCst)
    } else {
        verdict(&report)
    };
    match super::out::print(&text) {
        Ok(()) => Ok(code),
        // The reader took what it wanted; the run's exit stands.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(code),
        Err(error) => Err(error.into()),
    }
}

/// The exit of a run that was not stopped: 0 when every check that ran held
/// and at least one did and nothing is left behind; 1 otherwise, saying why
/// on stderr (even with -q).
fn verdict(report: &selftest::Report) -> u8 {
    let mut code = EXIT_OK;
    let failed: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Failed)
        .map(|c| c.name.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!(
            "fencepost: selftest: {} check(s) failed on this engine: {} (each shows what it expected and what it saw)",
            failed.len(),
            failed.join(", ")
        );
        code = EXIT_ATTENTION;
    } else if !report.proved_something() {
        eprintln!(
            "fencepost: selftest: no check held: nothing was proven (every check asked for was skipped; \
             each shows why)"
        );
        code = EXIT_ATTENTION;
    }
    // Said even with -q: something is left for the user to remove.
    for left in report.left_behind_by_the_run() {
        eprintln!("fencepost: selftest: left behind: {left}");
        code = EXIT_ATTENTION;
    }
    code
}

/// The signals that stop a run: Ctrl-C, and on Unix SIGTERM. Each answers
/// the exit a shell reports for the process that signal ended: 130, 143.
struct Stops {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

/// The exit of a run stopped by SIGTERM: 128 + 15.
#[cfg(unix)]
const EXIT_TERMINATED: u8 = 143;

impl Stops {
    fn listen() -> std::io::Result<Stops> {
        Ok(Stops {
            #[cfg(unix)]
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?,
        })
    }

    /// The exit code of the next stop signal; `None` when no more can come.
    async fn next(&mut self) -> Option<u8> {
        #[cfg(unix)]
        {
            tokio::select! {
                r = tokio::signal::ctrl_c() => r.ok().map(|()| EXIT_INTERRUPTED),
                s = self.term.recv() => s.map(|()| EXIT_TERMINATED),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.ok().map(|()| EXIT_INTERRUPTED)
        }
    }
}
