//! What runs T-SQL in the database outside any caller's session, as a
//! principal of its own: SQL Server Agent job steps, linked servers, and
//! Service Broker queue activation.

use serde::{Deserialize, Serialize};

use super::execute_as::{ExecuteAs, execute_as};

/// A T-SQL step of a SQL Server Agent job that runs in this database
/// (`msdb.dbo.sysjobsteps`, `subsystem = 'TSQL'`). It runs as the job's
/// owner, and whoever may edit the job decides what it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStep {
    /// The job's name.
    pub job: String,
    /// The step's number in its job (`step_id`).
    pub step_id: i32,
    /// The step's name.
    pub step: String,
    /// The login that owns the job (`sysjobs.owner_sid`); `None` when it
    /// names no login the server knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The step's command text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The database the step runs in (`database_name`), when it is not this
    /// one: then only what its command names of this database counts
    /// (`USE`, three-part names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The database user the step runs as (`database_user_name`), which only
    /// a sysadmin sets and which applies to a sysadmin-owned job's step; else
    /// a sysadmin owner's step runs as the Agent's own sysadmin login and any
    /// other owner's as that owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<String>,
}

/// An msdb principal that may rewrite any job without the Agent's
/// procedures, which let a non-sysadmin edit only its own jobs: by writing
/// `msdb.dbo.sysjobsteps` or `sysjobs` (their commands, their owners) as a
/// member of msdb's `db_owner` or `db_datawriter`, or with a grant there;
/// or that may change the Integration Services packages and data
/// collection sets the Agent runs, as a member of msdb's `db_ssisadmin` or
/// `dc_admin` ("Integration Services Roles": their members "may be able to
/// elevate their privileges to sysadmin").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEditor {
    /// The msdb user (`public` or `guest`: every login).
    pub user: String,
    /// Its login; `None` for `public`, `guest` or an orphaned user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<String>,
    /// The role (`db_datawriter`) or permission
    /// (`UPDATE ON OBJECT::dbo.sysjobsteps`) that lets it.
    pub via: String,
    /// Whether `via` is a role membership rather than a grant.
    pub via_role: bool,
    /// The msdb principal that is in that role or holds that grant: the user
    /// itself, or a role it is in.
    pub holder: String,
}

impl JobEditor {
    /// Whether it changes the packages the Agent runs (db_ssisadmin,
    /// dc_admin) rather than the job tables.
    pub fn changes_packages(&self) -> bool {
        self.via_role && PACKAGE_ROLES.iter().any(|r| r.eq_ignore_ascii_case(&self.via))
    }
}

/// msdb's roles whose members change the packages the Agent runs.
const PACKAGE_ROLES: [&str; 2] = ["db_ssisadmin", "dc_admin"];

/// The linked servers of the server and the names it answers to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkedServers {
    /// The names that reach this server: `@@SERVERNAME` and the machine name.
    pub this_server: Vec<String>,
    /// `sys.servers` rows with `is_linked = 1`.
    pub servers: Vec<LinkedServer>,
}

/// A linked server and its login mappings (`sys.linked_logins`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedServer {
    /// Its name in this server.
    pub name: String,
    /// The server it connects to (`data_source`); for a SQL Server linked
    /// server made without one, its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<String>,
    /// How local logins connect there.
    #[serde(default)]
    pub logins: Vec<LinkedLogin>,
}

/// One login mapping of a linked server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedLogin {
    /// The local login it applies to; `None` for every login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_login: Option<String>,
    /// Whether the login connects there as itself.
    pub uses_self_credential: bool,
    /// The remote login it connects as otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_login: Option<String>,
}

impl ServiceQueue {
    /// Whom its activation procedure runs as; `None` for SELF.
    pub(crate) fn runs_as(&self) -> Option<ExecuteAs<'_>> {
        execute_as(self.execute_as.as_deref(), self.execute_as_user)
    }
}

/// A Service Broker queue with activation on (`sys.service_queues`): its
/// procedure runs, as `execute_as`, whenever a message arrives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceQueue {
    /// `schema.name` of the queue.
    pub name: String,
    /// The queue's owner (its schema's, unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `schema.name` of the activation procedure.
    pub procedure: String,
    /// The principal the procedure runs as (`execute_as_principal_id`):
    /// `OWNER`, a user, or `None` for SELF (whoever set activation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute_as: Option<String>,
    /// Whether `execute_as` is a principal's name as it is, never the
    /// OWNER keyword (a user may be called Owner); catalogs saved before the
    /// reader marked them read `OWNER` as the keyword.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub execute_as_user: bool,
    /// The principals that may SEND on a service bound to the queue (or
    /// CONTROL it): whoever decides the messages the procedure reads.
    #[serde(default)]
    pub senders: Vec<String>,
}
