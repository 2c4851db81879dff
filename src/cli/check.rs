//! `fencepost check`.

use anyhow::{Result, bail};
use fencepost::audit::{self, Format, Policy};

use super::opt::{CheckArgs, CheckFormat};
use super::{connect, sources};

pub async fn run(args: CheckArgs) -> Result<u8> {
    let mut policy = Policy::default();
    for principal in &args.principals {
        policy.add_principal(principal);
    }
    // The users an environment grants the fence roles are services to audit.
    for grant in super::environment_grants(&args.connect)? {
        policy.add_principal(&grant.member);
    }
    // Trusted principals reach the fence by the operator's word; the report
    // still lists each with its path.
    for name in args
        .trusted
        .iter()
        .cloned()
        .chain(super::environment_trusted(&args.connect)?)
    {
        policy.add_trusted(name);
    }
    // Read before connecting: a bad id in the file is bad input, exit 2.
    let (environment, accepted_by_environment) = super::environment_accepted(&args.connect)?;
    let report = if args.offline {
        audit::lint_offline(
            &audit::ShippedScripts::from(&sources(args.source_dir.as_deref())?),
            &policy,
        )
    } else {
        let (_, mut conn) = connect(&args.connect).await?;
        let catalog = audit::read_catalog(&mut conn).await?;
        if let [first, ..] = policy.unknown_principals(&catalog)[..] {
            bail!(
                "service principal {first} (from --principal or --environment's grants): database {} has no principal \
                 of that name, and no user whose login (matched by SID) has it",
                catalog.database
            );
        }
        audit::evaluate(&catalog, &policy)
    };
    // Unknown ids were refused before the check ran; accepting a rule that
    // did not come out "cannot verify" changes nothing for it.
    let mut report = report;
    for &rule in &args.accept_unverifiable {
        report.accept_unverifiable(rule, "--accept-unverifiable");
    }
    for &rule in &accepted_by_environment {
        report.accept_unverifiable(rule, &environment);
    }
    let format = match args.format {
        CheckFormat::Text => Format::Text,
        CheckFormat::Json => Format::Json,
        CheckFormat::Junit => Format::Junit,
    };
    super::out::print(audit::render(&report, format))?;
    Ok(u8::try_from(report.exit_code()).unwrap_or(super::EXIT_ERROR))
}
