//! `fencepost selftest`.

use anyhow::{Context, Result};
use fencepost::ConnectionString;
use fencepost::selftest::{self, Event, SelftestOptions, Status};

use std::sync::{Arc, Mutex};

use super::opt::{CheckFormat, SelftestArgs};
use super::{EXIT_ATTENTION, EXIT_OK, connection_string, sources};

/// The exit of a run stopped by Ctrl-C: 128 + SIGINT, as a shell reports a
/// process SIGINT ended, so a pipeline never takes a cut-short run for a pass.
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
    // The scratch database while it exists, for a second Ctrl-C to name.
    let scratch: Arc<Mutex<Option<String>>> = Arc::default();
    // Ctrl-C stops between checks; the run still deletes its keys. Once
    // tokio listens for SIGINT it keeps the signal from ending the process,
    // so a second Ctrl-C is heard here and ends it at once.
    let interrupt = tokio_util::sync::CancellationToken::new();
    options.interrupt(interrupt.clone());
    let left = Arc::clone(&scratch);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            super::progress(format_args!(
                "selftest: stopping after the check under way (Ctrl-C again to stop now, leaving the run's rows)"
            ));
            interrupt.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("fencepost: selftest: stopped at once; the run's rows stay under its key prefix");
                if let Some(name) = left.lock().ok().and_then(|name| name.clone()) {
                    eprintln!(
                        "fencepost: selftest: the scratch database {name} stays: drop it yourself: DROP DATABASE [{name}];"
                    );
                }
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
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
        Event::ScratchCreated { name } => {
            if let Ok(mut left) = scratch.lock() {
                *left = Some(name.to_string());
            }
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
    super::out::print(&text)?;
    if report.interrupted {
        eprintln!(
            "fencepost: selftest: interrupted; {} check(s) not run: {} (the report covers only the checks that ran)",
            report.not_run.len(),
            report.not_run.join(", ")
        );
        return Ok(EXIT_INTERRUPTED);
    }
    if report.all_held() && !report.proved_something() {
        eprintln!(
            "fencepost: selftest: no check held: nothing was proven (every check asked for was skipped; \
             each shows why)"
        );
        return Ok(EXIT_ATTENTION);
    }
    if report.all_held() {
        Ok(EXIT_OK)
    } else {
        let failed: Vec<&str> = report
            .checks
            .iter()
            .filter(|c| c.status == Status::Failed)
            .map(|c| c.name.as_str())
            .collect();
        eprintln!(
            "fencepost: selftest: {} check(s) failed on this engine: {} (each shows what it expected and what it saw)",
            failed.len(),
            failed.join(", ")
        );
        Ok(EXIT_ATTENTION)
    }
}
