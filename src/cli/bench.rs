//! `fencepost bench`.

use std::io::IsTerminal;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Result;
use fencepost::bench::{self, BenchOptions, Event, Stop, Telemetry, Workload};

use super::opt::{BenchArgs, Format, WorkloadArg};
use super::{EXIT_ATTENTION, EXIT_OK, connection_string};

const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// `--telemetry`'s layer and recorder, made at start-up with the log
/// subscriber and read by the run.
static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

/// For `bench --telemetry`: the telemetry whose layer the process's one
/// subscriber must carry, its metrics recorder installed. Called once, before
/// anything is traced: the subscriber and the recorder are global, and a
/// scoped one would miss whatever runs on another thread.
pub fn start_telemetry(args: &BenchArgs) -> Option<Telemetry> {
    if !args.telemetry {
        return None;
    }
    let telemetry = TELEMETRY.get_or_init(Telemetry::new).clone();
    #[cfg(feature = "metrics")]
    if let Err(error) = telemetry.install_recorder() {
        // The report's count of call durations then shows none.
        super::progress(format_args!("bench: {error}"));
    }
    Some(telemetry)
}

pub async fn run(args: BenchArgs) -> Result<u8> {
    let mut target = connection_string(&args.connect)?;
    target.set_application_name("fencepost bench");
    let mut options = options(&args);
    // Ctrl-C stops the run; the bench still removes its keys and scratch table.
    let interrupt = tokio_util::sync::CancellationToken::new();
    options.interrupt(interrupt.clone());
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupt.cancel();
        }
    });
    // The progress line is rewritten in place, so only on a terminal.
    let terminal = std::io::stderr().is_terminal() && !super::quiet();
    let mut progress_shown = false;
    let mut on_event = |event: Event<'_>| match event {
        Event::Progress {
            scenario,
            operations,
            elapsed,
        } if terminal => {
            let phase = match elapsed {
                None => "warming up".to_string(),
                Some(t) => format!("{operations} ops in {:.1} s", t.as_secs_f64()),
            };
            // \r and "erase to end of line": one line, rewritten in place.
            eprint!("\r\x1b[Kbench: {scenario}: {phase}");
            progress_shown = true;
        }
        Event::Progress { .. } => {}
        Event::Note(note) => super::progress(format_args!("{}bench: {note}", if terminal { "\r\x1b[K" } else { "" })),
    };
    let outcome = bench::run(&target, &options, &mut on_event).await;
    if progress_shown {
        eprint!("\r\x1b[K");
    }
    let run = outcome?;
    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&run.report)? + "\n",
        Format::Text => run.report.to_text(),
    };
    super::out::print(&text)?;
    Ok(if run.cleaned_up { EXIT_OK } else { EXIT_ATTENTION })
}

fn options(args: &BenchArgs) -> BenchOptions {
    let stop = match (args.operations, args.duration) {
        (Some(n), _) => Stop::Operations(n),
        (None, duration) => Stop::Duration(duration.unwrap_or(DEFAULT_DURATION)),
    };
    let mut workloads: Vec<Workload> = args
        .workloads
        .iter()
        .map(|w| match w {
            WorkloadArg::Cycle => Workload::Cycle,
            WorkloadArg::Contended => Workload::Contended,
            WorkloadArg::Renew => Workload::Renew,
            WorkloadArg::Handover => Workload::Handover,
            WorkloadArg::Held => Workload::Held,
            WorkloadArg::Sets => Workload::Sets,
        })
        .collect();
    if workloads.is_empty() {
        workloads = vec![
            Workload::Cycle,
            Workload::Contended,
            Workload::Renew,
            Workload::Handover,
        ];
    }
    let mut options = BenchOptions::default();
    options
        .workers(args.workers)
        .stop(stop)
        .warmup(args.warmup)
        .workloads(workloads)
        .key_prefix(&args.key_prefix)
        .held_guards(args.held_guards.iter().copied());
    if args.telemetry {
        // Made by start_telemetry, unless the run began without it: then
        // the report shows that nothing was recorded.
        options.telemetry(TELEMETRY.get_or_init(Telemetry::new).clone());
    }
    options
}
