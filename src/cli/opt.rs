//! Every command-line flag, in one place.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use fencepost::deploy::Grant;

/// Fenced leases on SQL Server: deploy the fence, check its state, and prove
/// that nothing but its procedures can write it.
#[derive(Debug, Parser)]
#[command(name = "fencepost", version, propagate_version = true)]
#[command(
    after_help = "Exit status: 0 success; 1 something needs attention (status: pending or drifted \
objects, or a right the next deploy lacks; check: findings); 2 error (bad input, unreachable server, failed deploy, or check could not verify). \
With --format json (or junit, for check) a failure prints a document on stdout too: \
{\"error\": {\"kind\", \"message\"}}, kind one of connect, source, lock_timeout, deploy, not_deployed, bench, interrupted, usage."
)]
pub struct Options {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log more on stderr: -v what the command does, -vv each call.
    /// FENCEPOST_LOG (e.g. "fencepost=debug,tiberius=info") overrides both.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Print only errors on stderr: no progress lines, no warnings.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Deploy the schema, procedures and permissions to a database.
    ///
    /// Takes a deploy lock so two pipelines never deploy at once, applies
    /// pending migrations (each in its own transaction), deploys every
    /// procedure whose shipped text changed, and re-applies the permission
    /// scripts. A procedure altered on the server by hand stops the deploy
    /// unless --overwrite-drift is given. A second run changes nothing.
    Migrate(MigrateArgs),
    /// Show applied, pending and drifted objects, the rights the next deploy
    /// needs that this login lacks, the last deployment and the database
    /// identity, changing nothing.
    ///
    /// Exits 0 when everything is current and 1 when something is pending,
    /// changed, drifted or unknown, the login lacks a right the next deploy
    /// needs, or the database was restored or failed over since its identity
    /// was recorded.
    Status(StatusArgs),
    /// Write the whole deployment as one idempotent sqlcmd script, without a server.
    ///
    /// For reviewers, and for pipelines that cannot connect: run the result
    /// with `sqlcmd -i` or in SSMS with SQLCMD mode on.
    Script(ScriptArgs),
    /// Prove that nothing but the fence procedures can write the fence tables.
    ///
    /// Reads the database's catalog (principals, role memberships, permissions,
    /// owners, modules) and reports every path to the fence that bypasses the
    /// procedures, with the statement that closes it. Where the engine's catalog
    /// cannot show what a rule needs, the rule is reported as "cannot verify".
    /// With --offline, lints the shipped T-SQL instead, with no server.
    ///
    /// Exits 1 when a rule found a way past the fence; else 3 when a rule
    /// cannot verify (the login lacks the rights to see, or the platform
    /// cannot show it) and --accept-unverifiable did not accept it; else 0.
    /// Exits 2 when the check could not run at all: no connection, a failed
    /// login, bad input (an unknown rule id or principal). Findings outrank
    /// cannot-verify, which outranks clean; accepted rules count as clean
    /// and are listed in every format.
    Check(CheckArgs),
    /// Measure the lease calls against a deployed database, beside what a
    /// user would run instead.
    ///
    /// Runs the baselines `select1`, `raw_update` (the fence's conditional
    /// UPDATE alone, on a scratch table the bench creates and drops; skipped,
    /// saying so, when the login may not create it) and `applock_cycle`
    /// (sp_getapplock, UPDATE, sp_releaseapplock in one transaction), then the
    /// workloads through fencepost::Client, every scenario on the same number
    /// of connections (one per worker). Works on keys of its own under
    /// --key-prefix and deletes them afterwards (which needs a login that may
    /// delete from the fence tables, such as the deploy login), also when
    /// stopped with Ctrl-C.
    ///
    /// Refuses a database without the fence procedures (run `fencepost
    /// migrate` first). The client's refusal of a privileged login is turned
    /// off (ClientConfig::allow_privileged_login), so the deploy login may run
    /// it.
    ///
    /// Round trips per operation are requests counted as they are sent: each
    /// client call is one (a waiting acquire counts each attempt), a fenced
    /// cycle two (acquire, and a publish that releases); select1 and
    /// raw_update one, applock_cycle three; the handover scenarios count
    /// the waiter's requests alone. Latency percentiles come from a
    /// histogram over every measured operation (within 0.1%); warm-up is left
    /// out. `ratio_to` is the p50 divided by each baseline's p50. The
    /// process's CPU time per operation and its peak memory are reported
    /// beside them.
    Bench(BenchArgs),
    /// Prove the fence procedures hold on this engine, with its settings.
    ///
    /// Forces every behaviour the procedures and the client rely on as a
    /// schedule across separate sessions, against the deployed fence of this
    /// database.
    ///
    /// Runs the design's semantics (handover, late release and renew, publish
    /// after expiry, one publish per generation, replayed operation ids,
    /// overlapping acquisitions, a publish racing an acquisition, a cut around
    /// a publish's commit) and the engine behaviours of docs/engines.md (the
    /// row lock of a caller's transaction and its 5 s bound, implicit
    /// transactions, SNAPSHOT, the savepoint rule, the Attention that stops a
    /// waiting publish, the rights of a fence_service-only login). Prints the
    /// engine and the settings that change the answers, then for each check
    /// the behaviour, the document it follows, what it expected, what it saw,
    /// and held, FAILED or skipped (with why). `fencepost check` proves nothing
    /// can bypass the procedures; `selftest` proves the procedures hold here.
    ///
    /// Works only on keys of its own, `fencepost-selftest:<key
    /// prefix><check>` (a key there that holds a publication no selftest
    /// wrote is refused, untouched), the same in every run, so repeated runs add no fence row; two runs against one
    /// database and prefix take turns (an application lock; the second waits
    /// 10 s, then exits 2 saying another selftest runs). Every lease it takes
    /// lasts at most 30 s and is released by its check. At the end it
    /// deletes the rows of those keys when the login may (the database's
    /// owner, dbo); otherwise they stay, unheld, for the next run, and the
    /// report says so. Never runs Recover or PruneTenure in this database:
    /// with --scratch-database their checks run in a database the selftest
    /// creates and drops; otherwise they are skipped. The force-release and
    /// ListLeases checks run only when the login may execute
    /// fence_admin.ForceRelease and ListLeases (fence_operator); otherwise
    /// they are skipped, saying so.
    ///
    /// Exits 0 when every check that ran held and at least one did; 1 when
    /// one failed, when none held (every check was skipped: nothing was
    /// proven), or when it left behind rows it meant to delete or a scratch
    /// database it could not drop (each named on stderr); 2 when the selftest
    /// could not run; 130 when stopped by Ctrl-C, 143 by SIGTERM before
    /// every check ran (a signal after the last check ended leaves the
    /// run's own exit). Either signal abandons the check under way (its
    /// sessions closed, which rolls back what they held) or the making of
    /// the scratch database, then drops that database and deletes the run's
    /// rows within about 6 s; a second signal stops at once. The exit is
    /// the same when the reader of its output left early.
    Selftest(SelftestArgs),
    /// Look at leases and end a stuck one, as an operator.
    ///
    /// Runs through the fence procedures with the operator's login, never
    /// against the tables: `inspect` needs fence_reader (or fence_service),
    /// `history` fence_reader or fence_operator, `list` and `force-release`
    /// fence_operator, `prune` and `recover` fence_recovery. No command ever
    /// shows an owner id.
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// Check and clean the object stores fenced artefacts live in.
    ///
    /// A fenced artefact is uploaded create-only under
    /// {prefix}/{escaped key}/{generation}/{operation id} and published as a
    /// pointer through the fence; readers follow the pointer only. `verify`
    /// proves a store refuses to replace an object written create-only
    /// before services publish to it; `sweep` deletes the uploads no
    /// publication points to. Store URLs:
    /// file:///path, memory://, s3://bucket/path, az://container/path,
    /// gs://bucket/path; credentials from the environment as object_store
    /// reads them (AWS_*, AZURE_*, GOOGLE_*; docs/artifacts.md).
    #[cfg(feature = "artifacts")]
    #[command(subcommand)]
    Artifact(ArtifactCommand),
    /// Print a shell completion script, e.g. `fencepost completions bash >
    /// /etc/bash_completion.d/fencepost`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff), e.g. `fencepost man > fencepost.1`, or
    /// with --markdown the reference in docs/cli.md.
    Man(ManArgs),
}

/// `fencepost man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Print every command's help as one Markdown document instead (what
    /// docs/cli.md holds), e.g. `fencepost man --markdown > docs/cli.md`.
    #[arg(long)]
    pub markdown: bool,
}

/// `fencepost lease ...`.
#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Show a resource's lease: generation, whether it is held and until
    /// when (server clock), the last published generation, and the source
    /// version below which a publish is refused. Give every key of a lease
    /// set to see the set: one line per key (in --format json, an array of
    /// one object per key). Exits 1 when a key has no fence row.
    Inspect(LeaseKeyArgs),
    /// List resources and their leases in key order.
    List(LeaseListArgs),
    /// Show a resource's slots (a fenced semaphore): each provisioned slot
    /// key `RESOURCE#N` with its lease, and how many are held now (server
    /// clock), the count AcquireSlot holds against its slot count. Needs
    /// fence_operator or fence_recovery. Exits 1 when the resource has no
    /// slot provisioned, or its own key no fence row.
    Slots(LeaseSlotsArgs),
    /// Fence out the current holder of a key: raises its generation and
    /// clears the lease, so the holder's next renew, publish or fenced
    /// transaction is refused and the next acquirer gets the lease at once.
    /// Exits 1 when the key has no fence row. Behind a holder whose
    /// transaction stays open the call waits at most 5 s, then fails naming
    /// the blocking session; --kill-blocker ends that session (rolling its
    /// transaction back) and fences the key. A call whose reply is lost is
    /// sent again with the command's operation id, so the key is fenced once;
    /// the same --operation-id again changes nothing.
    ForceRelease(LeaseForceReleaseArgs),
    /// Show one resource's tenures, newest first: each generation somebody
    /// held, when it was acquired and ended, how it ended (Released, Expired,
    /// ForceReleased, Superseded) and whether it published. Owners appear only
    /// as SHA-256 of their upper-case text. Needs fence_reader or
    /// fence_operator. Exits 1 when the key has no fence row.
    History(LeaseHistoryArgs),
    /// Set a resource's source version: the watermark below which a publish
    /// or a fenced write built from an older source is refused (StaleSource).
    /// Lower it, or clear it by leaving VERSION out, when the source's
    /// versions restarted (a rebuilt change feed, a restored replica);
    /// otherwise every new build would be refused. Leases and publications
    /// stay as they are. Needs fence_operator. Exits 1 when the key has no
    /// fence row. A call whose reply is lost is sent again with the
    /// command's operation id, so it applies once; the same --operation-id
    /// (and VERSION) again changes nothing.
    ResetSourceVersion(LeaseResetSourceVersionArgs),
    /// Delete the tenure history that ended more than D days ago (server
    /// clock), keeping it bounded. Needs fence_recovery.
    Prune(LeasePruneArgs),
    /// After a restore from backup or a failover that lost writes: raise every
    /// resource's generation to a new epoch (a multiple of 2^40) above every
    /// generation the database holds and above --floor, and void every open
    /// lease (its holder's publish answers Superseded). Run it before services
    /// resume. Repeating it with the same --id changes nothing. Behind a
    /// transaction that stays open on a fence row it gives up after 5 seconds
    /// (rather than hold up every key meanwhile), names that session and
    /// exits 2: end it, then run the same recovery again. Needs
    /// fence_recovery (and VIEW SERVER STATE to name the session).
    Recover(LeaseRecoverArgs),
    /// Retire a key the application no longer uses: delete its fence row,
    /// its publish records and its history. Refused while the key is held
    /// (force-release it first). Generations never go back: a key provisioned
    /// afterwards, this one again included, starts at the retired generation
    /// or above. Needs fence_operator. Exits 1 when the key has no fence row.
    /// A call whose reply is lost is sent again with the command's operation
    /// id, so it applies once; the same --operation-id again changes nothing.
    Retire(LeaseRetireArgs),
    /// Delete the outcome records (accepted publishes, operator commands)
    /// recorded more than D days ago (server clock): the replay window. A
    /// publish replayed after its record is gone is refused as a second
    /// publish of its generation would be, and GetOutcome answers Unknown.
    /// Needs fence_recovery.
    PruneOutcomes(LeasePruneOutcomesArgs),
}

/// `fencepost lease retire`.
#[derive(Debug, Args)]
pub struct LeaseRetireArgs {
    /// The resource key, exactly (keys compare binary).
    pub key: String,
    #[command(flatten)]
    pub operation: OperationArgs,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost lease prune-outcomes`.
#[derive(Debug, Args)]
pub struct LeasePruneOutcomesArgs {
    /// Delete outcome records recorded more than this many days ago: `30` or
    /// `30d`. Keep it longer than any caller may take to replay a publish or
    /// an operator command.
    #[arg(long, value_name = "D", value_parser = parse_days)]
    pub older_than: i32,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost lease history`.
#[derive(Debug, Args)]
pub struct LeaseHistoryArgs {
    /// The resource key, exactly (keys compare binary).
    pub key: String,
    /// At most this many tenures, newest first.
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=100_000))]
    pub limit: i32,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost lease reset-source-version`.
#[derive(Debug, Args)]
pub struct LeaseResetSourceVersionArgs {
    /// The resource key, exactly (keys compare binary).
    pub key: String,
    /// The new source version (0 or more); without it the source version is
    /// cleared, and the next versioned publish sets it.
    #[arg(value_name = "VERSION", value_parser = clap::value_parser!(i64).range(0..))]
    pub source_version: Option<i64>,
    #[command(flatten)]
    pub operation: OperationArgs,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost lease prune`.
#[derive(Debug, Args)]
pub struct LeasePruneArgs {
    /// Delete tenures that ended more than this many days ago: `30` or `30d`.
    #[arg(long, value_name = "D", value_parser = parse_days)]
    pub older_than: i32,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost lease recover`.
#[derive(Debug, Args)]
pub struct LeaseRecoverArgs {
    /// The highest generation known to have been issued anywhere (e.g. the
    /// highest one a downstream system stored): the new generations start
    /// above it too. Give it when the restore may have lost an earlier
    /// recovery.
    #[arg(long, value_name = "GENERATION", value_parser = clap::value_parser!(i64).range(0..=4_611_686_018_427_387_903))]
    pub floor: Option<i64>,
    /// This recovery's id; repeating a recovery with the same id changes
    /// nothing. Defaults to the database's recovery fork where the engine
    /// shows one (so one restore is recovered once), otherwise a fresh id,
    /// printed so a retry can pass it.
    #[arg(long, value_name = "UUID")]
    pub id: Option<uuid::Uuid>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Days for `--older-than`: a whole number from 1 to 36500, with or without
/// a trailing `d`.
fn parse_days(text: &str) -> Result<i32, String> {
    let digits = text.strip_suffix('d').unwrap_or(text);
    match digits.parse::<i32>() {
        Ok(days) if (1..=36_500).contains(&days) => Ok(days),
        _ => Err(format!(
            "`{text}` is not a number of days from 1 to 36500 (write e.g. `90` or `90d`)"
        )),
    }
}

/// A lease command on one key.
#[derive(Debug, Args)]
pub struct LeaseKeyArgs {
    /// The resource key, exactly (keys compare binary); several for the keys
    /// of a lease set.
    #[arg(required = true, num_args = 1.., value_name = "KEY")]
    pub keys: Vec<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost lease slots`.
#[derive(Debug, Args)]
pub struct LeaseSlotsArgs {
    /// The resource whose slots to show (its slot keys are `RESOURCE#0`,
    /// `RESOURCE#1`, ...).
    pub resource: String,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost lease force-release`.
#[derive(Debug, Args)]
pub struct LeaseForceReleaseArgs {
    /// The resource key, exactly (keys compare binary).
    pub key: String,
    /// When another session's open transaction holds the fence row, end that
    /// session (KILL, which rolls its transaction back, so nothing it wrote
    /// commits) and fence the key. Needs ALTER ANY CONNECTION on SQL Server,
    /// KILL DATABASE CONNECTION on Azure SQL Database.
    #[arg(long)]
    pub kill_blocker: bool,
    #[command(flatten)]
    pub operation: OperationArgs,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// The operation id of an operator command that changes a key.
#[derive(Debug, Args)]
pub struct OperationArgs {
    /// This command's operation id. The command is recorded under it, and
    /// sending the same command with the same id again changes nothing and
    /// answers what the first did: give the id a command printed (or named
    /// in its error) when its outcome is unknown. Defaults to a fresh id,
    /// printed in --format json.
    #[arg(long, value_name = "UUID")]
    pub operation_id: Option<uuid::Uuid>,
}

/// `fencepost lease list`.
#[derive(Debug, Args)]
pub struct LeaseListArgs {
    /// Only keys that start with this.
    #[arg(long, default_value = "", value_name = "PREFIX")]
    pub prefix: String,
    /// Only leases held now (server clock).
    #[arg(long)]
    pub held: bool,
    /// At most this many rows.
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=100_000))]
    pub limit: i32,
    /// Only keys after this one (the last key of the previous page).
    #[arg(long, value_name = "KEY")]
    pub after: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost artifact ...`.
#[cfg(feature = "artifacts")]
#[derive(Debug, Subcommand)]
pub enum ArtifactCommand {
    /// Prove the store refuses to replace an object written create-only, as
    /// publishing needs (some S3-compatible stores, proxies and emulators
    /// accept the condition and ignore it): write a probe object
    /// create-only twice under the prefix, expect the second write to be
    /// refused (as already existing or as a failed precondition) and the
    /// probe to hold the first write's bytes, then delete it. Also reports
    /// how far the store's clock is from this host's, and marks the prefix
    /// as an artefact folder, as a store opened to publish does. Exits 0
    /// when the store refused and the probe was deleted; 1 when it took the
    /// second write, changed the probe or offers no create-only writes (do
    /// not publish to it), or the probe could not be deleted; 2 when the
    /// check could not be made (a URL it cannot use, a store it could not
    /// reach or write to).
    Verify(ArtifactVerifyArgs),
    /// Delete the objects under the prefix that no resource's current
    /// publication points to and that the database proves none ever will:
    /// their generation is no longer the key's current one, or its lease has
    /// ended, or it published another object. An upload whose lease is still
    /// held is kept however old (its publish may still commit). Objects
    /// younger than --older-than are kept whatever they are. Objects whose
    /// names are not artefacts' are never deleted, and neither are those the
    /// database cannot vouch for, kept in doubt: of a key with no fence row,
    /// of a key whose publication this build cannot read (a newer pointer
    /// format), or of a generation above the key's current one (the database
    /// is behind the store). Only a prefix that a store opened to publish has
    /// marked (its _fencepost object) is swept, and never the store's whole
    /// root, unless --allow-unmarked or --whole-store says so. Reads each key
    /// with Inspect and ReadPublication (fence_reader or fence_service).
    /// Ctrl-C stops it (while it lists, between two objects, or while it waits
    /// for the database) and reports what was done. Exits 0
    /// when every object was judged and nothing is in doubt; 1 when
    /// something was kept in doubt, a delete failed or it was interrupted; 2
    /// when the prefix was refused or a publication could not be read (after
    /// reporting what was done).
    Sweep(ArtifactSweepArgs),
}

/// Which store and where in it.
#[cfg(feature = "artifacts")]
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The store: file:///path, memory://, s3://bucket/path,
    /// az://container/path (or azure://, abfs://), gs://bucket/path.
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// The folder under the URL's path that the artefacts are in.
    #[arg(long, default_value = "", value_name = "P")]
    pub prefix: String,
}

/// `fencepost artifact verify`.
#[cfg(feature = "artifacts")]
#[derive(Debug, Args)]
pub struct ArtifactVerifyArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost artifact sweep`.
#[cfg(feature = "artifacts")]
#[derive(Debug, Args)]
pub struct ArtifactSweepArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The grace: only objects last written longer ago than this are
    /// deleted, e.g. 15m, 3h, 2d. Some minutes cover a store whose listing
    /// lags its writes; add the most the store's clock and this machine's
    /// may disagree by.
    #[arg(long, value_name = "D", value_parser = parse_span)]
    pub older_than: Duration,
    /// Also require --older-than to exceed twice this lease, the longest
    /// any worker publishing under the prefix takes (an age guard besides
    /// the database's proof).
    #[arg(long, value_name = "D", value_parser = parse_span)]
    pub longest_lease: Option<Duration>,
    /// Sweep a prefix that no store opened to publish has marked (artefacts
    /// published by fencepost 0.1.0, which did not mark its prefixes).
    #[arg(long)]
    pub allow_unmarked: bool,
    /// Sweep with an empty --prefix: the store's whole root, where other
    /// applications' objects are likeliest.
    #[arg(long)]
    pub whole_store: bool,
    /// Report what would be deleted, and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format (progress goes to stderr when it is a terminal).
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// How to reach the database.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// ADO.NET connection string, e.g.
    /// "Server=tcp:db,1433;Database=app;User ID=deploy;Password=...;Encrypt=true",
    /// or a JDBC URL, e.g. "jdbc:sqlserver://db:1433;databaseName=app;user=deploy;password=...".
    /// Without it, the variable named by --environment's connection_env,
    /// then FENCEPOST_CONNECTION, is read.
    #[arg(long, short = 'c', value_name = "ADO_STRING")]
    pub connection: Option<String>,
    /// Sign in with the Microsoft Entra ID access token in this file (Azure
    /// SQL) instead of a SQL login [default: the token in FENCEPOST_ACCESS_TOKEN, if set].
    #[arg(long, value_name = "PATH")]
    pub access_token_file: Option<PathBuf>,
    /// An environment of fencepost.toml: where its connection string is, and
    /// the users `migrate` adds to the fence roles. Flags override it.
    #[arg(long, short = 'e', env = "FENCEPOST_ENVIRONMENT", value_name = "NAME")]
    pub environment: Option<String>,
    /// The file that defines --environment [default: ./fencepost.toml].
    #[arg(long, value_name = "FILE", requires = "environment")]
    pub config: Option<PathBuf>,
}

/// Where the T-SQL a deploy applies comes from (`migrate`, `script`).
/// `status` and `check` declare their own `--source-dir`, whose help says
/// what that command does with the folder.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Deploy the T-SQL under this folder (with migrations/, procedures/ and
    /// permissions/) instead of the copy built into this binary.
    #[arg(long, value_name = "DIR")]
    pub source_dir: Option<PathBuf>,
}

/// Output format for people or pipelines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Readable text.
    #[default]
    Text,
    /// One JSON document on stdout.
    Json,
}

/// `fencepost migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Show what would change, and change nothing. Exits 0 when there is
    /// nothing to do, 1 when changes are pending, 2 when a deploy would stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Add an existing database user to a fence role after the deploy, e.g.
    /// fence_service=svc_reports (repeatable; idempotent; names quoted by the
    /// server). Replaces the grants of --environment.
    #[arg(long = "grant", value_name = "ROLE=USER", value_parser = parse_grant)]
    pub grants: Vec<Grant>,
    /// Redeploy shipped procedures that were altered on the server since
    /// fencepost deployed them (drift). Without it, drift stops the deploy
    /// before anything changes; `fencepost status --diff` shows it.
    #[arg(long)]
    pub overwrite_drift: bool,
    /// Seconds to wait for another deployment of the same database to finish.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub lock_timeout: u64,
    /// Seconds each statement of a migration waits for a lock (SET
    /// LOCK_TIMEOUT) before the migration fails and is rolled back, so that a
    /// caller's long transaction on a fence table fails the deploy instead of
    /// stalling every fence call behind it. 0 waits not at all.
    #[arg(
        long,
        env = "FENCEPOST_MIGRATION_LOCK_TIMEOUT",
        default_value_t = 5,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(0..=2_147_483)
    )]
    pub migration_lock_timeout: u64,
    /// Output format of the summary (progress goes to stderr).
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Compare the database with the T-SQL under this folder (with migrations/,
    /// procedures/ and permissions/) instead of the copy built into this binary.
    #[arg(long, value_name = "DIR")]
    pub source_dir: Option<PathBuf>,
    /// Also show, as a unified diff, how each drifted procedure's definition
    /// on the server differs from the shipped text.
    #[arg(long)]
    pub diff: bool,
    /// Also list the last N recorded deployments (who, when, which fencepost,
    /// what each applied), most recent first.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub history: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Which side of the engine a script is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ScriptTarget {
    /// The T-SQL deployment, for sqlcmd.
    #[default]
    Sqlcmd,
    /// Babelfish's PostgreSQL side, for psql: makes the fence procedures of
    /// --database SECURITY DEFINER, which Babelfish needs (it does not chain
    /// ownership) for services holding only fence_service. Run it after
    /// every migrate, as a PostgreSQL superuser or the Babelfish database's owner.
    BabelfishPostgres,
}

/// `fencepost script`.
#[derive(Debug, Args)]
pub struct ScriptArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// What the script is for.
    #[arg(long, value_enum, default_value_t)]
    pub target: ScriptTarget,
    /// The T-SQL database the fence was deployed to (with --target babelfish-postgres).
    #[arg(long, value_name = "NAME", required_if_eq("target", "babelfish-postgres"))]
    pub database: Option<String>,
    /// Print instead the script that removes everything a deploy created
    /// (tables and their rows, procedures, schemas, roles, the deploy
    /// journal), in one transaction. It refuses while a lease is held.
    #[arg(long, conflicts_with_all = ["target", "database"])]
    pub uninstall: bool,
    /// End the script with a section that adds an existing database user to
    /// a fence role, as `migrate --grant` does, e.g. fence_service=svc_reports
    /// (repeatable; idempotent; every member is checked before any is added;
    /// names quoted by the server).
    #[arg(long = "grant", value_name = "ROLE=USER", value_parser = parse_grant, conflicts_with_all = ["uninstall", "database"])]
    pub grants: Vec<Grant>,
    /// Print instead the script a DBA runs before the first deploy: the fence
    /// schemas and roles, owned by dbo (each only if missing). The deployer
    /// then needs rights on those schemas, not on the whole database.
    #[arg(long, conflicts_with_all = ["target", "database", "uninstall", "grants"])]
    pub schemas: bool,
    /// Write the script to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Output format of `check`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// A readable table of rules, then each finding with its fix.
    #[default]
    Text,
    /// One JSON document.
    Json,
    /// JUnit XML, one test case per rule, for CI systems.
    Junit,
}

/// `fencepost check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// With --offline, lint the T-SQL under this folder (with migrations/,
    /// procedures/ and permissions/) instead of the copy built into this binary.
    /// A check of a database reads its catalog, so this needs --offline.
    #[arg(long, value_name = "DIR", requires = "offline")]
    pub source_dir: Option<PathBuf>,
    /// Lint the shipped T-SQL (grants and procedure bodies) without a server.
    #[arg(long)]
    pub offline: bool,
    /// Also treat this database principal, or the login of one, as a service
    /// principal (repeatable); a name that matches neither is an error. The
    /// four fence roles, their members and whoever may execute a fence
    /// procedure always are, and so are the users --environment grants.
    #[arg(long = "principal", value_name = "NAME")]
    pub principals: Vec<String>,
    /// Trust this database principal or login (the deployer, a named admin)
    /// to reach the fence (repeatable): the report lists it and its path
    /// instead of a finding. dbo and db_owner are always trusted, and so
    /// are the names --environment's `trusted` lists.
    #[arg(long = "trust", value_name = "NAME")]
    pub trusted: Vec<String>,
    /// Accept these rules' "cannot verify" as something this platform can
    /// never show (FP002 and FP015 on Azure SQL Database): comma-separated
    /// ids, repeatable, added to --environment's `accept_unverifiable`. An
    /// accepted rule no longer keeps the exit at 3; every report still lists
    /// it as accepted-unverifiable, with the rule's reason and this flag. A
    /// rule that found something, or passed, is reported as it came out. An
    /// unknown id is an error (exit 2).
    #[arg(long = "accept-unverifiable", value_name = "RULE", value_delimiter = ',', value_parser = parse_rule)]
    pub accept_unverifiable: Vec<fencepost::audit::Rule>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: CheckFormat,
}

/// A rule id (`FP002`), case-insensitive, as `check` reports it.
pub(crate) fn parse_rule(id: &str) -> Result<fencepost::audit::Rule, String> {
    fencepost::audit::Rule::from_id(&id.trim().to_ascii_uppercase()).ok_or_else(|| {
        format!("unknown rule id '{id}': rule ids are FP and three digits, as `fencepost check` lists them (FP002)")
    })
}

/// A workload of `bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    /// Each worker: acquire, publish, release on its own key (scenarios
    /// acquire, publish and release), then acquire and a publish that
    /// releases (scenario fenced_cycle, as run_fenced does it).
    Cycle,
    /// Every worker on one key with a waiting acquire and a 1 s lease, then
    /// publish and release (contended); and as a job queue's workers, each
    /// holding the key in a guard for 20 ms of work, then publishing and
    /// releasing it early in one call, its waiters woken by the guard's
    /// handover signal (contended_guarded).
    Contended,
    /// Each worker renewing a lease it holds.
    Renew,
    /// Pairs of workers: a holder releases early while the other waits in
    /// acquire_waiting; the time from the release's reply to the waiter's
    /// grant, with the holder's guard signalling (handover) and without
    /// (handover_polling), beside two sessions handing over an sp_getapplock
    /// session lock (applock_handover).
    Handover,
    /// One client holding many guards of 30 s at once (--held-guards) for
    /// the measured time, at least 11 s: its sessions on the server, its
    /// calls a second, the server's CPU and its memory per lease, with the
    /// renewals due together in one call and, beside it, one call each. Only
    /// when asked for.
    Held,
    /// Each worker's own keys taken as a lease set of 2, 8 and 32 keys in one
    /// call (set_acquire_N) and one by one (single_acquires_N); only the
    /// acquires are measured. Not part of the default run.
    Sets,
}

/// `fencepost bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Concurrent workers, each on a connection of its own.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub workers: u32,
    /// How long to measure each scenario, e.g. 10s, 500ms, 2m [default: 10s].
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "operations")]
    pub duration: Option<Duration>,
    /// Measure this many operations of each scenario (over all workers)
    /// instead of a duration.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub operations: Option<u64>,
    /// Unmeasured operations each worker runs before each scenario.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub warmup: u32,
    /// Workloads to run after the baselines (repeatable or comma-separated)
    /// [default: all but held].
    #[arg(long = "workload", value_enum, value_delimiter = ',', value_name = "WORKLOAD")]
    pub workloads: Vec<WorkloadArg>,
    /// How many guards the held workload holds at once, one row each
    /// (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "N", default_value = "100,1000,10000",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub held_guards: Vec<u32>,
    /// The start of every key the bench makes; a run id follows it.
    #[arg(long, default_value = "fencepost-bench:", value_name = "PREFIX")]
    pub key_prefix: String,
    /// Run with observability on, to measure what it costs per call: a
    /// tracing layer that records every fencepost span and event at every
    /// level, fields and timings included, formatted as a log line each into
    /// a sink (beside the usual stderr log, whose level is unchanged), and a
    /// metrics recorder that keeps every update in an exporter's registry.
    /// The report says `telemetry: on` and how much each saw; compare its
    /// client CPU per operation with a run without.
    #[arg(long)]
    pub telemetry: bool,
    /// Output format (progress goes to stderr when it is a terminal).
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// `fencepost selftest`.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// A connection string for a login holding only fence_service (same
    /// database): the service_login_rights check runs the cycle as it and
    /// shows it cannot read or write the fence tables or force a release.
    /// Skipped without it.
    #[arg(
        long,
        value_name = "ADO",
        env = "FENCEPOST_SERVICE_CONNECTION",
        hide_env_values = true
    )]
    pub service_connection: Option<String>,
    /// Run only this check (repeatable or comma-separated); all by default.
    /// `--list` names them.
    #[arg(long = "check", value_delimiter = ',', value_name = "NAME")]
    pub checks: Vec<String>,
    /// List the checks, in the order a run takes them, and exit.
    #[arg(long)]
    pub list: bool,
    /// What follows `fencepost-selftest:` in every key the selftest makes
    /// (the check's name follows it): `--key-prefix ci:` makes keys
    /// `fencepost-selftest:ci:<check>`. It never replaces that root, so a
    /// selftest key is never one of yours; a key under the root holding a
    /// publication no selftest wrote is refused and left as it is.
    #[arg(long, default_value = "", hide_default_value = true, value_name = "PREFIX")]
    pub key_prefix: String,
    /// Run the checks that act on every key of a database (Recover,
    /// PruneTenure) in a scratch database of the selftest's own, never in
    /// yours: it is created on the same server as `fencepost_selftest_<run
    /// id>` (the login needs CREATE DATABASE; on Azure SQL Database a login
    /// in master that is the server's admin or a member of dbmanager), given
    /// your database's settings where the engine lets it, deployed as
    /// `migrate` does (the T-SQL built into this binary, not what your
    /// database runs, unless --source-dir names it), and dropped at the end
    /// of the run, also after a failure, Ctrl-C or SIGTERM; its name is
    /// printed before it is created. Without it those checks are skipped.
    #[arg(long)]
    pub scratch_database: bool,
    /// Deploy the T-SQL under this folder (with migrations/, procedures/ and
    /// permissions/) to the scratch database: the folder your database was
    /// deployed from. Without it the scratch database runs the T-SQL built
    /// into this binary, not what your database runs, so the checks there
    /// prove this binary's procedures.
    #[arg(long, value_name = "DIR", requires = "scratch_database")]
    pub source_dir: Option<PathBuf>,
    /// Output format (a progress line per check goes to stderr).
    #[arg(long, value_enum, default_value_t)]
    pub format: CheckFormat,
}

/// `ROLE=USER`, for a fence role.
fn parse_grant(text: &str) -> Result<Grant, String> {
    Grant::parse(text)
}

/// `2s`, `500ms`, `1m`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration: write e.g. 10s, 500ms or 2m"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        other => return Err(format!("unknown unit '{other}': use ms, s or m")),
    };
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err("the duration must be more than zero".into());
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A grace or a lease for `artifact sweep`: a whole number and a unit, `s`,
/// `m`, `h` or `d` (`90m`, `3h`, `2d`); a bare number is seconds.
#[cfg(feature = "artifacts")]
fn parse_span(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit_seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "'{text}' is not a duration: write a whole number and s, m, h or d (e.g. 90m, 3h, 2d)"
            ));
        }
    };
    match number.parse::<u64>() {
        Ok(n) if n > 0 => n
            .checked_mul(unit_seconds)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("'{text}' is too long")),
        _ => Err(format!(
            "'{text}' is not a duration: write a whole number more than zero and s, m, h or d (e.g. 90m, 3h, 2d)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "artifacts")]
    #[test]
    fn sweep_spans_take_s_m_h_and_d() {
        assert_eq!(parse_span("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_span("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_span("7"), Ok(Duration::from_secs(7)));
        for bad in ["0h", "1.5h", "3w", "h", ""] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_command_definition_is_consistent() {
        // Clap checks names, conflicts and defaults only when a command is
        // built: a clash (an argument called `version` beside --version)
        // would otherwise surface as a panic in the field.
        <Options as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn durations_take_ms_s_and_m_or_bare_seconds() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
    }

    #[test]
    fn a_duration_without_a_number_or_with_an_unknown_unit_is_refused() {
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("2h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("0s").is_err());
    }
}
