//! `fencepost artifact`: prove a store refuses to replace an object written
//! create-only before services publish to it, and sweep the uploads no
//! publication points to. The work is the library's ([`fencepost::artifact`]); these
//! commands render what it answers.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result};
use fencepost::artifact::{
    ArtifactError, ArtifactStore, CreateOnlyProof, CreateRefusal, DeletedBecause, KeptBecause, Sweep, SweepEvent,
    SweepReport, open_url, redact_url,
};
use fencepost::{Client, ClientConfig};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::opt::{ArtifactCommand, ArtifactSweepArgs, ArtifactVerifyArgs, Format};
use super::{EXIT_ATTENTION, EXIT_ERROR, EXIT_OK, connection_string, out};

impl ArtifactCommand {
    /// The output format asked for.
    pub fn format(&self) -> Format {
        match self {
            ArtifactCommand::Verify(args) => args.format,
            ArtifactCommand::Sweep(args) => args.format,
        }
    }
}

pub async fn run(command: ArtifactCommand) -> Result<u8> {
    match command {
        ArtifactCommand::Verify(args) => verify(args).await,
        ArtifactCommand::Sweep(args) => sweep(args).await,
    }
}

async fn verify(args: ArtifactVerifyArgs) -> Result<u8> {
    let (url, prefix) = (&args.store.store, &args.store.prefix);
    let shown = redact_url(url);
    // Opened to publish, as a service opens it: the probe, and the mark on
    // the prefix that the sweep requires.
    let verdict = match ArtifactStore::open_with_proof(url, prefix).await {
        Ok((_, proof)) => Ok(proof),
        Err(
            refused @ (ArtifactError::CreateNotEnforced { .. }
            | ArtifactError::CreateUnsupported { .. }
            | ArtifactError::ProbeNotKept { .. }),
        ) => Err(refused),
        Err(error) => return Err(error).with_context(|| format!("verifying {shown}")),
    };
    let verified = Verified {
        store: &shown,
        prefix,
        verdict: &verdict,
    };
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&verified.json())?)?,
        Format::Text => out::print(verified.text())?,
    }
    Ok(verified.exit())
}

/// What `artifact verify` found in a store it could check.
struct Verified<'a> {
    /// The store URL, redacted.
    store: &'a str,
    prefix: &'a str,
    /// The probe's proof, or why the store is not published to.
    verdict: &'a Result<CreateOnlyProof, ArtifactError>,
}

impl Verified<'_> {
    /// What the operator should act on although the store refused to
    /// replace the probe.
    fn warnings(&self) -> Vec<String> {
        let Ok(proof) = self.verdict else {
            return Vec::new();
        };
        proof
            .probe_left
            .iter()
            .map(|reason| {
                format!(
                    "the probe {} could not be deleted ({reason}): a refused publish cannot delete its upload \
                     either, nor a sweep with these rights an orphan; let this login delete under the prefix",
                    proof.probe
                )
            })
            .collect()
    }

    /// 0 when the store refused to replace the probe and the probe was
    /// deleted; 1 when it is not to be published to, or a warning stands.
    fn exit(&self) -> u8 {
        if self.verdict.is_ok() && self.warnings().is_empty() {
            EXIT_OK
        } else {
            EXIT_ATTENTION
        }
    }

    fn json(&self) -> serde_json::Value {
        let proof = self.verdict.as_ref().ok();
        json!({
            "store": self.store,
            "prefix": self.prefix,
            "create_only": proof.is_some(),
            "refused_as": proof.map(|p| match p.refused_as {
                CreateRefusal::AlreadyExists => "already_exists",
                CreateRefusal::PreconditionFailed => "precondition_failed",
                _ => "other",
            }),
            "clock_skew_ms": proof.map(|p| p.clock_skew.num_milliseconds()),
            "write_ms": proof.map(|p| p.round_trip.as_millis() as u64),
            "probe_deleted": proof.map(|p| p.probe_left.is_none()),
            "warnings": self.warnings(),
            "problem": self.verdict.as_ref().err().map(ToString::to_string),
        })
    }

    fn text(&self) -> String {
        let proof = match self.verdict {
            Ok(proof) => proof,
            Err(problem) => return format!("{}: not to be published to: {problem}\n", self.store),
        };
        let refused_as = match proof.refused_as {
            CreateRefusal::AlreadyExists => "as already existing".to_string(),
            CreateRefusal::PreconditionFailed => "as a failed precondition (412)".to_string(),
            other => format!("({other:?})"),
        };
        let skew = proof.clock_skew.num_milliseconds() as f64 / 1000.0;
        let clock = if skew < 0.0 {
            format!(
                "{:.3} s behind this host's (the sweep sees objects that much older than they are)",
                -skew
            )
        } else if skew > 0.0 {
            format!("{skew:.3} s ahead of this host's")
        } else {
            format!(
                "in step with this host's, as far as the probe's write ({:.3} s) and the store's timestamps show",
                proof.round_trip.as_secs_f64()
            )
        };
        let mut lines = vec![
            format!(
                "{}: refuses to replace an object written create-only: a second create-only write of a probe was \
                 refused {refused_as}, and the probe still held the first write's bytes",
                self.store
            ),
            format!("{}: the store's clock is {clock}", self.store),
        ];
        if proof.probe_left.is_none() {
            lines.push(format!("{}: the probe was deleted", self.store));
        }
        lines.extend(self.warnings().into_iter().map(|w| format!("warning: {w}")));
        lines.iter().map(|line| format!("{line}\n")).collect()
    }
}

/// How long one ReadPublication of the sweep may take.
const SWEEP_CALL_TIMEOUT: Duration = Duration::from_secs(60);

async fn sweep(args: ArtifactSweepArgs) -> Result<u8> {
    let mut plan = Sweep::new(args.older_than)?;
    if let Some(longest_lease) = args.longest_lease {
        plan.longest_lease(longest_lease)?;
    }
    plan.dry_run(args.dry_run)
        .allow_unmarked(args.allow_unmarked)
        .whole_store(args.whole_store);
    let (store, base) = open_url(&args.store.store)?;
    let prefix = fencepost::artifact::join_prefix(&base, &args.store.prefix)?;
    plan.may_walk(store.as_ref(), &prefix).await?;
    let mut target = connection_string(&args.connect)?;
    target.set_application_name("fencepost artifact sweep");
    let mut config = ClientConfig::new(target);
    config.max_connections(1).call_timeout(SWEEP_CALL_TIMEOUT);
    let client = Client::connect_with(config).await?;
    // Ctrl-C stops between two objects; what was done is reported.
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    // The progress line is rewritten in place, so only on a terminal.
    let terminal = std::io::stderr().is_terminal() && !super::quiet();
    let mut listed = 0;
    let on_event = |event: SweepEvent| match event {
        SweepEvent::Listed { objects } => listed = objects,
        SweepEvent::Progress { done, deleted } if terminal => {
            let verb = if args.dry_run { "would delete" } else { "deleted" };
            eprint!("\r\x1b[Ksweep: {done} of {listed} looked at, {deleted} {verb}");
        }
        _ => {}
    };
    let report = plan
        .run(store.as_ref(), &prefix, &client, chrono::Utc::now(), &stop, on_event)
        .await;
    if terminal {
        eprint!("\r\x1b[K");
    }
    let report = report.with_context(|| format!("sweeping {prefix} of {}", redact_url(&args.store.store)))?;
    let failed = report
        .kept
        .iter()
        .any(|kept| matches!(kept.why, KeptBecause::DeleteFailed(_)));
    match args.format {
        Format::Json => {
            let mut document = serde_json::to_value(&report)?;
            document["store"] = json!(redact_url(&args.store.store));
            document["prefix"] = json!(prefix.as_ref());
            document["grace_seconds"] = json!(args.older_than.as_secs());
            document["longest_lease_seconds"] = json!(args.longest_lease.map(|lease| lease.as_secs()));
            out::line(serde_json::to_string_pretty(&document)?)?;
        }
        Format::Text => out::print(text(&report))?,
    }
    if let Some(error) = &report.failed {
        // The report above says what was done before it stopped.
        eprintln!("fencepost: the sweep stopped: {error}");
        return Ok(EXIT_ERROR);
    }
    // Kept in doubt: the store and the database disagree, which someone
    // should look at before trusting later sweeps of this prefix.
    let in_doubt = report.kept.iter().any(|kept| kept.why.in_doubt());
    Ok(if report.interrupted || failed || in_doubt {
        EXIT_ATTENTION
    } else {
        EXIT_OK
    })
}

/// The report as lines: a summary, then each object deleted, each kept in
/// doubt, and each delete that failed.
fn text(report: &SweepReport) -> String {
    let count = |why: fn(&KeptBecause) -> bool| report.kept.iter().filter(|k| why(&k.why)).count();
    let verb = if report.dry_run { "would delete" } else { "deleted" };
    let mut lines = vec![format!(
        "{} objects: {verb} {}, kept {} ({} published, {} within the grace, {} may still be published, {} not artefacts, \
         {} in doubt, {} delete failed){}",
        report.listed,
        report.deleted.len(),
        report.kept.len(),
        count(|w| matches!(w, KeptBecause::Published)),
        count(|w| matches!(w, KeptBecause::WithinGrace)),
        count(|w| matches!(w, KeptBecause::PublishMayCommit)),
        count(|w| matches!(w, KeptBecause::NotAnArtifact)),
        count(KeptBecause::in_doubt),
        count(|w| matches!(w, KeptBecause::DeleteFailed(_))),
        if report.interrupted {
            "; interrupted: the rest was not looked at"
        } else if report.failed.is_some() {
            "; stopped at a publication it could not read: the rest was not looked at"
        } else {
            ""
        },
    )];
    for deleted in &report.deleted {
        let why = match deleted.why {
            DeletedBecause::Orphan => "no publication points to it, and the database shows none can",
            DeletedBecause::Probe => "a store check's probe",
            _ => "",
        };
        lines.push(format!("{verb}  {}  ({why})", deleted.object.location));
    }
    for kept in &report.kept {
        let why = match &kept.why {
            KeptBecause::DeleteFailed(error) => format!("its delete failed: {error}"),
            KeptBecause::NotProvisioned => "in doubt: its key has no fence row".into(),
            KeptBecause::UnreadablePublication => {
                "in doubt: its key's publication is a pointer this build cannot read, or names no artefact of its key"
                    .into()
            }
            KeptBecause::AheadOfDatabase => "in doubt: its generation is above its key's current one".into(),
            KeptBecause::UnreadableKey(error) => format!("in doubt: the database refused its key: {error}"),
            _ => continue,
        };
        lines.push(format!("kept  {}  ({why})", kept.object.location));
    }
    lines.iter().map(|line| format!("{line}\n")).collect()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use fencepost::artifact::{
        ArtifactError, CreateOnlyProof, CreateRefusal, Deleted, DeletedBecause, Kept, KeptBecause, SweepReport,
        SweptObject,
    };

    use super::{EXIT_ATTENTION, EXIT_OK, Verified, text};

    fn proof(probe_left: Option<&str>) -> CreateOnlyProof {
        CreateOnlyProof {
            probe: "p/_probe/1".into(),
            refused_as: CreateRefusal::PreconditionFailed,
            clock_skew: chrono::TimeDelta::milliseconds(-2_500),
            round_trip: std::time::Duration::from_millis(40),
            probe_left: probe_left.map(Into::into),
        }
    }

    #[test]
    fn verify_reports_a_precondition_refusal_and_the_clock_skew_and_passes_the_store() {
        let verdict = Ok(proof(None));
        let verified = Verified {
            store: "s3://b/p",
            prefix: "daily",
            verdict: &verdict,
        };
        assert_eq!(verified.exit(), EXIT_OK);
        let text = verified.text();
        assert!(text.contains("refused as a failed precondition (412)"), "{text}");
        assert!(text.contains("2.500 s behind this host's"), "{text}");
        assert!(text.contains("the probe was deleted"), "{text}");
        assert!(!text.contains("fit for"), "{text}");
        let json = verified.json();
        assert_eq!(json["create_only"], true);
        assert_eq!(json["refused_as"], "precondition_failed");
        assert_eq!(json["clock_skew_ms"], -2_500);
        assert_eq!(json["write_ms"], 40);
        assert_eq!(json["probe_deleted"], true);
        assert_eq!(json["warnings"], serde_json::json!([]));
    }

    #[test]
    fn verify_warns_and_exits_1_when_the_probe_could_not_be_deleted() {
        let verdict = Ok(proof(Some("permission denied")));
        let verified = Verified {
            store: "s3://b/p",
            prefix: "daily",
            verdict: &verdict,
        };
        assert_eq!(verified.exit(), EXIT_ATTENTION);
        let text = verified.text();
        assert!(
            text.contains("warning: the probe p/_probe/1 could not be deleted (permission denied)"),
            "{text}"
        );
        assert!(!text.contains("the probe was deleted"), "{text}");
        let json = verified.json();
        assert_eq!(json["probe_deleted"], false);
        assert_eq!(json["warnings"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn verify_says_why_a_store_is_not_published_to_and_exits_1() {
        let verdict = Err(ArtifactError::ProbeNotKept {
            store: "OverwritingStore".into(),
            probe: "p/_probe/1".into(),
            found: "the second write's bytes".into(),
        });
        let verified = Verified {
            store: "s3://b/p",
            prefix: "daily",
            verdict: &verdict,
        };
        assert_eq!(verified.exit(), EXIT_ATTENTION);
        assert!(
            verified
                .text()
                .starts_with("s3://b/p: not to be published to: the store OverwritingStore refused")
        );
        assert_eq!(verified.json()["create_only"], false);
    }

    fn object(location: &str) -> SweptObject {
        SweptObject {
            location: location.into(),
            size: 1,
            last_modified: Utc::now(),
        }
    }

    #[test]
    fn the_sweep_s_text_counts_what_it_kept_and_names_each_deletion_doubt_and_failed_delete() {
        let report = SweepReport {
            dry_run: false,
            listed: 5,
            kept: vec![
                Kept {
                    object: object("p/k/2/b"),
                    why: KeptBecause::Published,
                },
                Kept {
                    object: object("p/k/1/c"),
                    why: KeptBecause::DeleteFailed("permission denied".into()),
                },
                Kept {
                    object: object("p/j/1/d"),
                    why: KeptBecause::NotProvisioned,
                },
            ],
            deleted: vec![
                Deleted {
                    object: object("p/k/1/a"),
                    why: DeletedBecause::Orphan,
                },
                Deleted {
                    object: object("p/_probe/x"),
                    why: DeletedBecause::Probe,
                },
            ],
            interrupted: true,
            failed: None,
        };
        assert_eq!(
            text(&report),
            "5 objects: deleted 2, kept 3 (1 published, 0 within the grace, 0 may still be published, 0 not artefacts, \
             1 in doubt, 1 delete failed); interrupted: the rest was not looked at\n\
             deleted  p/k/1/a  (no publication points to it, and the database shows none can)\n\
             deleted  p/_probe/x  (a store check's probe)\n\
             kept  p/k/1/c  (its delete failed: permission denied)\n\
             kept  p/j/1/d  (in doubt: its key has no fence row)\n"
        );
    }
}
