//! Opening a TDS connection from an ADO.NET connection string or a JDBC URL,
//! with failures sorted into what the operator has to fix.

mod integrated;
mod keys;
mod socket;
#[cfg(test)]
pub(crate) mod stand_in;
mod telemetry_target;

use std::time::Duration;

use tiberius::{AuthMethod, Client, Config, SqlBrowser};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use keys::{Keys, ServerName, SignIn, TOKEN_ADVICE};
pub(crate) use telemetry_target::TelemetryTarget;

/// An open TDS connection.
pub type Connection = Client<Compat<TcpStream>>;

/// How long to wait for TCP, TLS and login together unless the connection
/// string says otherwise (`Connect Timeout`, as in ADO.NET).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The longest `Connect Timeout` accepted: a day. Larger values are refused
/// naming the key; they would mean "wait for ever", which a pool that must
/// report a dead server cannot honour (and the deadline must stay on the
/// clock: `Instant + u64::MAX s` overflows).
pub const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(86_400);

/// SQL Server error numbers that mean "the login failed".
const LOGIN_FAILED: u32 = 18456;
/// "Cannot open database requested by the login." (SQL Server), and
/// "database does not exist" (Babelfish answers a missing database so).
const CANNOT_OPEN_DATABASE: [u32; 2] = [4060, 911];

/// Why a connection could not be opened. Each variant names what to fix; none
/// of them carries the password or the access token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection string could not be parsed, or asks for something this
    /// build cannot do.
    #[error("invalid connection string: {reason}")]
    InvalidConnectionString {
        /// What was wrong with it.
        reason: String,
    },
    /// The string asks for an access token and none was given.
    #[error(
        "the connection string asks for Authentication={authentication}, but no access token was given; {TOKEN_ADVICE}"
    )]
    MissingAccessToken {
        /// The `Authentication` value.
        authentication: String,
    },
    /// Nothing answered at the address.
    #[error("cannot reach {server}: {reason} (check Server=host,port and that the server accepts TCP)")]
    Unreachable {
        /// `host:port` that was tried.
        server: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The SQL Browser did not give a port for the named instance.
    #[error(
        "cannot find instance {server}: {reason} (check the instance name and that the SQL Browser service answers on UDP port 1434, or give the port: Server=host,port)"
    )]
    InstanceNotFound {
        /// `host\INSTANCE` that was asked for.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The TCP connection itself did not open in time.
    #[error("{server} did not accept a TCP connection within {}s (check the address and the firewall)", .after.as_secs())]
    TimedOut {
        /// `host:port` that was tried.
        server: String,
        /// How long we waited.
        after: Duration,
    },
    /// The TCP connection opened but the server did not finish the login
    /// handshake in time.
    #[error("{server} accepted the connection but did not complete the login within {}s (is it a SQL Server (TDS) endpoint, and does its Encrypt setting match?)", .after.as_secs())]
    HandshakeTimedOut {
        /// `host:port` that was connected to.
        server: String,
        /// How long we waited in all.
        after: Duration,
    },
    /// The TCP connection opened, then the server closed it during the login
    /// handshake.
    #[error(
        "{server} closed the connection during login (is it a SQL Server (TDS) endpoint? does it need TLS: Encrypt=true, or refuse it: Encrypt=DANGER_PLAINTEXT?)"
    )]
    ClosedDuringLogin {
        /// `host:port` that was connected to.
        server: String,
    },
    /// The TLS handshake failed.
    #[error("TLS with {server} failed: {reason} (check Encrypt and TrustServerCertificate)")]
    Tls {
        /// `host:port` that was tried.
        server: String,
        /// The TLS library's reason.
        reason: String,
    },
    /// The string asks to sign in as the running identity (`Integrated
    /// Security=true|SSPI`, `Trusted_Connection=yes`), and this build cannot:
    /// a Windows build can, and so can a Linux or macOS build with feature
    /// `integrated-auth-gssapi`.
    #[error(
        "{key}={value} (Windows or Kerberos sign-in) needs a build that has it: {}; this build has not, so \
         use a SQL login (User ID and Password), or on Azure SQL {TOKEN_ADVICE}",
        integrated::BUILDS_THAT_CAN
    )]
    IntegratedSignInNotBuilt {
        /// The key as written in ADO.NET's spelling (`Integrated Security`
        /// or `Trusted_Connection`).
        key: &'static str,
        /// Its value as written.
        value: String,
    },
    /// The server refused the credentials.
    #[error("login failed for user '{user}' on {server} (check User ID and Password)")]
    LoginFailed {
        /// `host:port` that was tried.
        server: String,
        /// The login name given.
        user: String,
    },
    /// The server refused the running identity (`Integrated Security`).
    #[error(
        "login failed on {server} for the identity this process runs as (Integrated Security): check that it has \
         a login there, and with Kerberos that `klist` shows a ticket and the server's SPN (MSSQLSvc/host:port) \
         is registered"
    )]
    IntegratedLoginFailed {
        /// `host:port` that was tried.
        server: String,
    },
    /// The server refused the access token.
    #[error(
        "{server} refused the access token (it may have expired, be for another resource than https://database.windows.net/, or name an identity with no user in the database)"
    )]
    TokenRefused {
        /// `host:port` that was tried.
        server: String,
    },
    /// The access token provider of the client's configuration failed (or
    /// gave no token within `Connect Timeout`); nothing was sent.
    #[error("the access token provider gave no token for {server}")]
    AccessTokenProvider {
        /// `host:port` the token was for.
        server: String,
        /// The provider's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The login worked but the database cannot be opened.
    #[error("cannot open database '{database}' on {server}: it does not exist or the login may not use it")]
    DatabaseUnavailable {
        /// `host:port` that was tried.
        server: String,
        /// The database requested.
        database: String,
    },
    /// Anything else the driver reported while connecting, such as Azure
    /// SQL's 40613 ("database not currently available") during a failover.
    /// The driver's reason is part of the message, not a `source()`: a pool
    /// keeps only the message of a failed attempt, and a `{:#}` rendering
    /// then prints the reason once.
    #[error("cannot connect to {server}: {}", connect_reason(.driver))]
    Other {
        /// `host:port` that was tried.
        server: String,
        /// The driver's error.
        driver: tiberius::error::Error,
    },
}

/// A parsed connection string: the driver configuration plus the few fields
/// fencepost reports in messages or applies itself, read by the same rules as
/// the driver's. Its `Debug` output leaves the credentials out.
#[derive(Clone)]
pub struct ConnectionString {
    config: Config,
    server: ServerName,
    user: String,
    database: String,
    /// Whether the string named the database; without one the server uses
    /// the login's default database, which the client does not know.
    database_named: bool,
    connect_timeout: Duration,
    sign_in: SignIn,
    authentication: Option<String>,
    has_password: bool,
    has_token: bool,
}

impl std::fmt::Debug for ConnectionString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionString")
            .field("server", &self.server())
            .field("database", &self.database)
            .field("user", &self.user)
            .field("access_token", &self.has_token)
            .finish_non_exhaustive()
    }
}

impl ConnectionString {
    /// Parses an ADO.NET connection string such as
    /// `Server=tcp:db,1433;Database=app;User ID=deploy;Password=...;Encrypt=true`,
    /// or a JDBC URL such as
    /// `jdbc:sqlserver://db:1433;databaseName=app;user=deploy;password=...;encrypt=true`.
    ///
    /// A string asking for a way of signing in this build cannot honour
    /// (`Authentication=Active Directory Default`, `Integrated Security=SSPI`,
    /// ...) is refused here, naming what to use instead.
    /// `Authentication=ActiveDirectoryAccessToken` is accepted and needs
    /// [`set_access_token`](Self::set_access_token) before connecting.
    pub fn parse(text: &str) -> Result<Self, ConnectError> {
        let invalid = |reason: String| ConnectError::InvalidConnectionString { reason };
        if text.trim().is_empty() {
            return Err(invalid("it is empty".into()));
        }
        let keys = Keys::parse(text).map_err(invalid)?;
        let server = keys.server().map_err(invalid)?;
        let sign_in = keys.sign_in().map_err(invalid)?;
        // Decided before the driver reads the string: it would read a string
        // it cannot honour as a SQL login with an empty user.
        let integrated = match sign_in {
            SignIn::Integrated => Some(integrated::method(keys.given_user(), keys.given_password()).ok_or_else(
                || ConnectError::IntegratedSignInNotBuilt {
                    key: keys.integrated_security_key(),
                    value: keys.integrated_security().unwrap_or_default().to_string(),
                },
            )?),
            _ => None,
        };
        let connect_timeout = keys
            .connect_timeout(MAX_CONNECT_TIMEOUT)
            .map_err(invalid)?
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        // The driver takes the first of a key's synonyms (`uid` before
        // `User ID`, `Server` before `Data Source`), ADO.NET the last: it
        // reads the string without the spellings a later one overrides.
        let mut config = match keys.driver_string() {
            None => Config::from_jdbc_string(text.trim()),
            Some(ado) => Config::from_ado_string(&ado),
        }
        .map_err(|e| invalid(driver_reason(&e)))?;
        // Set here rather than left to the driver's parser, which reads
        // neither `Trusted_Connection` nor every JDBC spelling; the method is
        // the one that parser picks (integrated.rs).
        // A SQL login is set here too: the driver's parser would honour an
        // `Integrated Security` that a later `Trusted_Connection=no` turned off.
        match integrated {
            Some(method) => config.authentication(method),
            None if sign_in == SignIn::SqlLogin => config.authentication(AuthMethod::sql_server(
                keys.user().unwrap_or_default(),
                keys.password().unwrap_or_default(),
            )),
            None => {}
        }
        Ok(Self {
            config,
            server,
            user: keys.user().unwrap_or_default().to_string(),
            database: keys.database().unwrap_or("master").to_string(),
            database_named: keys.database().is_some(),
            connect_timeout,
            sign_in,
            authentication: keys.authentication().map(str::to_string),
            has_password: keys.user().is_some() || keys.has_password(),
            has_token: false,
        })
    }

    /// Signs in with a Microsoft Entra ID access token (for Azure SQL, from
    /// `az account get-access-token --resource https://database.windows.net/`)
    /// instead of a SQL login. Refused when the string also gives a User ID or
    /// Password, as ADO.NET refuses it.
    pub fn set_access_token(&mut self, token: &str) -> Result<(), ConnectError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(ConnectError::InvalidConnectionString {
                reason: "the access token is empty".into(),
            });
        }
        if self.sign_in == SignIn::Integrated {
            return Err(ConnectError::InvalidConnectionString {
                reason: "an access token was given, and the connection string asks for Integrated Security: \
                         leave Integrated Security out to sign in with the token, or unset the token"
                    .into(),
            });
        }
        if self.has_password {
            return Err(ConnectError::InvalidConnectionString {
                reason: "an access token was given, and the connection string also has a User ID or Password: \
                         leave them out to sign in with the token, or unset the token to use the SQL login"
                    .into(),
            });
        }
        self.config.authentication(AuthMethod::aad_token(token));
        self.has_token = true;
        Ok(())
    }

    /// Whether connections sign in with an access token.
    pub fn uses_access_token(&self) -> bool {
        self.has_token
    }

    /// The server this string points at: `host:port`, or `host\INSTANCE`
    /// when the port is to be asked of the SQL Browser.
    pub fn server(&self) -> String {
        self.server.display()
    }

    /// The database named by the string (`master` when none is).
    pub fn database(&self) -> &str {
        &self.database
    }

    /// Where calls go, as OpenTelemetry's database conventions name it.
    pub(crate) fn telemetry_target(&self) -> TelemetryTarget {
        TelemetryTarget::of(&self.server, self.database_named.then_some(self.database.as_str()))
    }

    /// The login name given (empty when none is).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// How long connecting may take in all (`Connect Timeout`).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// A copy of this connection string pointed at another database; `self`
    /// is left as it was (as `Path::with_extension` leaves its path), where
    /// the `set_*` methods change the string in place.
    pub fn with_database(&self, database: &str) -> Self {
        let mut copy = self.clone();
        copy.config.database(database);
        copy.database = database.to_string();
        copy.database_named = true;
        copy
    }

    /// Bounds each server round trip; `None` waits as long as the server takes
    /// (a deploy that waits for another deploy's lock needs that).
    pub fn set_command_timeout(&mut self, timeout: Option<Duration>) {
        self.config.command_timeout(timeout);
    }

    /// The per-round-trip timeout the driver applies (see
    /// [`set_command_timeout`](Self::set_command_timeout)).
    pub fn command_timeout(&self) -> Option<Duration> {
        self.config.get_command_timeout()
    }

    /// Sets the application name the server records for these sessions.
    pub fn set_application_name(&mut self, name: &str) {
        self.config.application_name(name);
    }

    /// Opens a connection, following one Azure SQL gateway redirect. TCP,
    /// TLS and login together take at most `Connect Timeout`.
    pub async fn connect(&self) -> Result<Connection, ConnectError> {
        if self.sign_in == SignIn::AccessToken && !self.has_token {
            return Err(ConnectError::MissingAccessToken {
                authentication: self.authentication.clone().unwrap_or_default(),
            });
        }
        // Parsing bounds the timeout; `checked_add` keeps a value that got
        // past it from panicking on the clock.
        let now = Instant::now();
        let deadline = now
            .checked_add(self.connect_timeout)
            .unwrap_or_else(|| now + MAX_CONNECT_TIMEOUT);
        match self.open(self.config.clone(), &self.server, deadline).await? {
            Opened::Connected(connection) => Ok(*connection),
            Opened::Redirected { host, port } => {
                let mut redirected = self.config.clone();
                redirected.host(&host);
                redirected.port(port);
                let server = ServerName {
                    host,
                    instance: None,
                    port: Some(port),
                };
                match self.open(redirected, &server, deadline).await? {
                    Opened::Connected(connection) => Ok(*connection),
                    Opened::Redirected { host, port } => Err(ConnectError::Other {
                        server: server.display(),
                        driver: tiberius::error::Error::Routing { host, port },
                    }),
                }
            }
        }
    }

    /// One attempt: TCP (through the SQL Browser for a named instance without
    /// a port), then the TDS handshake, each failure named for its phase.
    async fn open(&self, mut config: Config, server: &ServerName, deadline: Instant) -> Result<Opened, ConnectError> {
        let shown = server.display();
        let timed_out = || ConnectError::TimedOut {
            server: shown.clone(),
            after: self.connect_timeout,
        };
        let tcp = if server.instance.is_some() && server.port.is_none() {
            match tokio::time::timeout_at(deadline, TcpStream::connect_named(&config)).await {
                Err(_) => return Err(timed_out()),
                Ok(Ok(tcp)) => {
                    socket::tune(&tcp);
                    tcp
                }
                Ok(Err(tiberius::error::Error::Io { message, .. })) => {
                    return Err(ConnectError::Unreachable {
                        server: shown,
                        reason: message,
                    });
                }
                Ok(Err(e)) => {
                    return Err(ConnectError::InstanceNotFound {
                        server: shown,
                        reason: browser_reason(&e),
                    });
                }
            }
        } else {
            match tokio::time::timeout_at(deadline, TcpStream::connect(server.addr())).await {
                Err(_) => return Err(timed_out()),
                Ok(Err(e)) => {
                    return Err(ConnectError::Unreachable {
                        server: shown,
                        reason: e.to_string(),
                    });
                }
                Ok(Ok(tcp)) => {
                    socket::tune(&tcp);
                    tcp
                }
            }
        };
        // Where the SQL Browser sent us, for the messages that follow.
        let reached = match (&server.instance, server.port, tcp.peer_addr()) {
            (Some(instance), None, Ok(peer)) => format!("{}\\{instance} (port {})", server.host, peer.port()),
            _ => shown,
        };
        // The whole handshake is bounded here, by the connection string's
        // timeout, so the driver's own bound (and its advice) never shows.
        config.handshake_timeout(None);
        match tokio::time::timeout_at(deadline, Client::connect(config, tcp.compat_write())).await {
            Err(_) => Err(ConnectError::HandshakeTimedOut {
                server: reached,
                after: self.connect_timeout,
            }),
            Ok(Ok(connection)) => Ok(Opened::Connected(Box::new(connection))),
            Ok(Err(tiberius::error::Error::Routing { host, port })) => Ok(Opened::Redirected { host, port }),
            Ok(Err(error)) => Err(self.classify_handshake(reached, error)),
        }
    }

    fn classify_handshake(&self, server: String, error: tiberius::error::Error) -> ConnectError {
        use std::io::ErrorKind;
        use tiberius::error::Error;
        match error {
            Error::Io {
                kind: ErrorKind::TimedOut,
                ..
            } => ConnectError::HandshakeTimedOut {
                server,
                after: self.connect_timeout,
            },
            Error::Io {
                kind:
                    ErrorKind::UnexpectedEof
                    | ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe,
                ..
            } => ConnectError::ClosedDuringLogin { server },
            Error::Io { message, .. } if message.contains("closed") || message.contains("eof") => {
                ConnectError::ClosedDuringLogin { server }
            }
            Error::Tls(reason) => ConnectError::Tls { server, reason },
            Error::Protocol(ref reason) if reason.contains("encryption level") => ConnectError::Tls {
                server,
                reason: "the server does not offer the encryption the string asks for".into(),
            },
            Error::Server(ref e) if e.code() == LOGIN_FAILED && self.has_token => ConnectError::TokenRefused { server },
            Error::Server(ref e) if e.code() == LOGIN_FAILED && self.sign_in == SignIn::Integrated => {
                ConnectError::IntegratedLoginFailed { server }
            }
            Error::Server(ref e) if e.code() == LOGIN_FAILED => ConnectError::LoginFailed {
                server,
                user: self.user.clone(),
            },
            Error::Server(ref e) if CANNOT_OPEN_DATABASE.contains(&e.code()) => ConnectError::DatabaseUnavailable {
                server,
                database: self.database.clone(),
            },
            driver => ConnectError::Other { server, driver },
        }
    }
}

/// What one attempt came to, short of an error.
enum Opened {
    Connected(Box<Connection>),
    /// An Azure SQL gateway sent us to another host.
    Redirected {
        host: String,
        port: u16,
    },
}

/// The driver's reason for refusing a string, without its advice on how to
/// build a driver configuration in code.
fn driver_reason(error: &tiberius::error::Error) -> String {
    let text = match error {
        tiberius::error::Error::Conversion(reason) => reason.to_string(),
        other => other.to_string(),
    };
    text.split(". hint:").next().unwrap_or(&text).trim().to_string()
}

/// What the driver reported, as an operator reads it: a server's own message
/// with its number, without the driver's "Token error" framing.
fn connect_reason(error: &tiberius::error::Error) -> String {
    match error {
        tiberius::error::Error::Server(token) => {
            format!("{} (error {}, class {})", token.message(), token.code(), token.class())
        }
        other => other.to_string(),
    }
}

/// The SQL Browser's failure, without the driver's phrasing of it.
fn browser_reason(error: &tiberius::error::Error) -> String {
    let text = match error {
        tiberius::error::Error::Conversion(reason) => reason.to_string(),
        other => other.to_string(),
    };
    if text.contains("timeout") {
        "the SQL Browser did not answer within 1s".into()
    } else if text.contains("Could not resolve") {
        "the SQL Browser's answer names no TCP port".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_message_repeats_its_cause() {
        // `Other` carries the driver's reason in its text and keeps no source.
        let errors = [ConnectError::AccessTokenProvider {
            server: "db:1433".into(),
            source: "the identity endpoint answered 500".into(),
        }];
        for error in &errors {
            assert!(std::error::Error::source(error).is_some(), "{error:?} has a cause");
            crate::says_once::assert_each_cause_said_once(error);
        }
    }

    #[test]
    fn parses_the_fields_reported_in_messages() {
        let s = ConnectionString::parse(
            "Server=tcp:db.example,1444;Database=app;User ID=deploy;Password='p;w''d';Connect Timeout=3",
        )
        .unwrap();
        assert_eq!(s.server(), "db.example:1444");
        assert_eq!(s.database(), "app");
        assert_eq!(s.user, "deploy");
        assert_eq!(s.connect_timeout, Duration::from_secs(3));
    }

    /// What the driver made of a string, read from its configuration's
    /// `Debug` output (it has no getters for these): the login name, the
    /// database, and whether it signs in with a token.
    fn driver_reading(s: &ConnectionString) -> (Option<String>, Option<String>, bool) {
        let debug = format!("{:?}", s.config);
        let field = |start: &str| {
            let at = debug.find(start)? + start.len();
            // A Debug-quoted string: read up to the first unescaped quote.
            let mut value = String::new();
            let mut chars = debug[at..].chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => return Some(value),
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
            None
        };
        (
            field("SqlServerAuth { user: \""),
            field("database: Some(\""),
            debug.contains("AADToken("),
        )
    }

    /// Strings on which fencepost's reading and the driver's must agree:
    /// (string, server, user, database).
    const TABLE: &[(&str, &str, &str, &str)] = &[
        ("Server=db;User ID=u;Password=p;Database=app", "db:1433", "u", "app"),
        // ADO.NET reads each group of synonyms as one key: the last written wins.
        (
            "Server=tcp:db,1444;uid=first;User ID=second;Password=p",
            "db:1444",
            "second",
            "master",
        ),
        ("Server=db;User ID=a;user=b;Password=p", "db:1433", "b", "master"),
        (
            "Server=db;User ID=u;Database=db1;Initial Catalog=cat",
            "db:1433",
            "u",
            "cat",
        ),
        (
            "Server=db;User ID=u;Initial Catalog=cat;DatabaseName=dn",
            "db:1433",
            "u",
            "dn",
        ),
        ("Data Source=other;Server=db,1500;User ID=u", "db:1500", "u", "master"),
        (
            "Server=db;User ID=second;uid=first;Password=p",
            "db:1433",
            "first",
            "master",
        ),
        ("Server=db;user=a;username=b;Password=p", "db:1433", "b", "master"),
        (
            "Server=db;User ID=u;Initial Catalog=cat;Database=db1",
            "db:1433",
            "u",
            "db1",
        ),
        ("Server=db;User ID=u;Initial Catalog=cat", "db:1433", "u", "cat"),
        ("Server=db;User ID=u;DatabaseName=dn", "db:1433", "u", "dn"),
        (
            "Server=db;User ID=u;DatabaseName=dn;Initial Catalog=cat",
            "db:1433",
            "u",
            "cat",
        ),
        ("Server=db;User ID=u;Database=one;Database=two", "db:1433", "u", "two"),
        ("Server=db;User ID=one;User ID=two", "db:1433", "two", "master"),
        (
            "Server=db;USER id = spaced ;DATABASE=Upper",
            "db:1433",
            "spaced",
            "Upper",
        ),
        (
            "Server=db;User ID='a;b';Database=\"c;\"\"d\"",
            "db:1433",
            "a;b",
            "c;\"d",
        ),
        ("Server=db;User ID={x;y};Database={p=q}", "db:1433", "x;y", "p=q"),
        ("Data Source=(local),1500;User ID=u", "localhost:1500", "u", "master"),
        ("Server=db\\INST;User ID=u", "db\\INST", "u", "master"),
        ("Server=db\\INST,1600;User ID=u", "db:1600", "u", "master"),
        ("Server=db;Data Source=other;User ID=u", "other:1433", "u", "master"),
        (
            "Server=db\\INST;Data Source=other,1600;User ID=u",
            "other:1600",
            "u",
            "master",
        ),
        (
            "jdbc:sqlserver://jhost:1555;databaseName=jdb;user=ju;password=p;encrypt=true;trustServerCertificate=true",
            "jhost:1555",
            "ju",
            "jdb",
        ),
        (
            "jdbc:sqlserver://jhost;database=a;databaseName=b;user=ju",
            "jhost:1433",
            "ju",
            "a",
        ),
        (
            "jdbc:sqlserver://jhost;user=one;user=two;password={p;w}",
            "jhost:1433",
            "two",
            "master",
        ),
        ("jdbc:sqlserver://jhost\\INST;user=ju", "jhost\\INST", "ju", "master"),
        (
            "jdbc:sqlserver://jhost\\INST:1700;user=ju",
            "jhost:1700",
            "ju",
            "master",
        ),
        (
            "jdbc:sqlserver://jhost:1433;userName=ju;Initial Catalog=ic",
            "jhost:1433",
            "ju",
            "ic",
        ),
    ];

    #[test]
    fn fencepost_reads_user_database_and_server_as_the_driver_does() {
        for (text, server, user, database) in TABLE {
            let s = ConnectionString::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                (s.server().as_str(), s.user(), s.database()),
                (*server, *user, *database),
                "{text}"
            );
            let (driver_user, driver_database, token) = driver_reading(&s);
            assert_eq!(driver_user.as_deref(), Some(*user), "driver's user for {text}");
            let expected_database =
                (*database != "master" || text.to_ascii_lowercase().contains("=master")).then_some(*database);
            assert_eq!(
                driver_database.as_deref(),
                expected_database,
                "driver's database for {text}"
            );
            assert!(!token, "{text}");
            assert_eq!(s.server.addr(), s.config.get_addr(), "driver's address for {text}");
        }
    }

    #[test]
    fn quoting_follows_the_driver_where_ado_net_differs() {
        // The driver ends a braced value at the first '}', and refuses what
        // follows it; fencepost refuses the same string rather than read it
        // another way.
        let text = "Server=db;Password={p}}q};User ID=u";
        assert!(Config::from_ado_string(text).is_err());
        assert!(ConnectionString::parse(text).is_err());
        let text = "Server=db;Password='p''q';User ID=u";
        assert_eq!(ConnectionString::parse(text).unwrap().user(), "u");
    }

    #[test]
    fn ways_of_signing_in_this_build_cannot_honour_are_refused_naming_the_token() {
        for text in [
            "Server=x.database.windows.net;Authentication=Active Directory Default;Database=app",
            "Server=x;Authentication=ActiveDirectoryPassword;User ID=a@b;Password=p",
            "Server=x;Authentication=ActiveDirectoryInteractive",
            "Server=x;Authentication=Active Directory Managed Identity",
            "Server=x;Authentication=ActiveDirectoryServicePrincipal;User ID=id;Password=s",
            "jdbc:sqlserver://x:1433;authentication=ActiveDirectoryMSI",
        ] {
            let err = ConnectionString::parse(text).unwrap_err().to_string();
            assert!(err.contains("Authentication="), "{text}: {err}");
            assert!(
                err.contains("FENCEPOST_ACCESS_TOKEN") && err.contains("az account get-access-token"),
                "{text}: {err}"
            );
        }
        for text in [
            "Server=x;Integrated Security=false;User ID=u;Password=p",
            "Server=x;Authentication=SqlPassword;User ID=u;Password=p",
            "Server=x;Authentication=Sql Password;User ID=u;Password=p",
        ] {
            assert!(ConnectionString::parse(text).is_ok(), "{text}");
        }
    }

    #[tokio::test]
    async fn an_access_token_string_needs_a_token_before_it_connects() {
        let s = ConnectionString::parse("Server=127.0.0.1,1;Authentication=ActiveDirectoryAccessToken").unwrap();
        let err = s.connect().await.unwrap_err();
        assert!(matches!(err, ConnectError::MissingAccessToken { .. }), "{err}");
        assert!(err.to_string().contains("FENCEPOST_ACCESS_TOKEN"), "{err}");
    }

    #[test]
    fn a_token_signs_in_with_the_driver_s_token_method() {
        for text in [
            "Server=x.database.windows.net;Database=app;Authentication=ActiveDirectoryAccessToken",
            "Server=x.database.windows.net;Database=app",
            "jdbc:sqlserver://x.database.windows.net:1433;databaseName=app;encrypt=true",
        ] {
            let mut s = ConnectionString::parse(text).unwrap();
            s.set_access_token("  eyJ0eXAi.token\n").unwrap();
            assert!(s.uses_access_token());
            assert!(format!("{:?}", s.config).contains("AADToken("), "{text}");
            assert!(!format!("{s:?}{:?}", s.config).contains("eyJ0eXAi"));
        }
    }

    #[test]
    fn a_token_beside_a_user_or_password_is_refused() {
        let mut s = ConnectionString::parse("Server=x;User ID=u;Password=p").unwrap();
        let err = s.set_access_token("tok").unwrap_err().to_string();
        assert!(err.contains("User ID or Password"), "{err}");
        assert!(!s.uses_access_token());
        let mut s = ConnectionString::parse("Server=x").unwrap();
        assert!(s.set_access_token(" \n").is_err());
    }

    #[test]
    fn a_jdbc_url_s_login_timeout_is_the_connect_timeout() {
        let s = ConnectionString::parse("jdbc:sqlserver://h:1;loginTimeout=4;user=u").unwrap();
        assert_eq!(s.connect_timeout(), Duration::from_secs(4));
    }

    #[test]
    fn a_bad_timeout_is_refused_with_the_key_named() {
        let err = ConnectionString::parse("Server=x;Connect Timeout=soon").unwrap_err();
        assert!(err.to_string().contains("Connect Timeout"), "{err}");
    }

    #[tokio::test]
    async fn a_connect_timeout_too_large_to_add_to_a_clock_is_refused_naming_the_key() {
        for text in [
            "Server=tcp:127.0.0.1,1;Connect Timeout=18446744073709551615",
            "Server=tcp:127.0.0.1,1;Connect Timeout=86401",
            "jdbc:sqlserver://127.0.0.1:1;loginTimeout=18446744073709551615",
        ] {
            // Before the bound, parsing accepted these and `connect` panicked
            // adding the timeout to the clock.
            match ConnectionString::parse(text) {
                Err(err) => {
                    let err = err.to_string();
                    assert!(
                        err.contains("Connect Timeout") && err.contains("86400"),
                        "{text}: {err}"
                    );
                }
                Ok(s) => panic!(
                    "{text} was accepted: {:?}, connect gave {:?}",
                    s.connect_timeout(),
                    s.connect().await.err()
                ),
            }
        }
        let s = ConnectionString::parse("Server=tcp:127.0.0.1,1;Connect Timeout=86400").unwrap();
        assert_eq!(s.connect_timeout(), MAX_CONNECT_TIMEOUT);
        assert!(matches!(s.connect().await, Err(ConnectError::Unreachable { .. })));
    }

    #[tokio::test]
    async fn a_refused_login_of_another_kind_keeps_the_server_s_reason_once() {
        let stand_in = stand_in::StandIn::start(stand_in::Answer::Refuse {
            number: 40613,
            message: "Database 'app' on server 'db' is not currently available. Please retry the connection later.",
        })
        .await;
        let s = ConnectionString::parse(&stand_in.ado("User ID=u;Password=p;Database=app")).unwrap();
        let err = s.connect().await.unwrap_err();
        assert!(matches!(err, ConnectError::Other { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("cannot connect to 127.0.0.1:{}", stand_in.port)),
            "{text}"
        );
        assert!(
            text.contains("not currently available") && text.contains("40613"),
            "{text}"
        );
        // Printed with its chain, as a binary prints with anyhow, the reason
        // shows once.
        let chain = format!("{:#}", anyhow::Error::from(err));
        assert_eq!(chain.matches("not currently available").count(), 1, "{chain}");
    }

    #[test]
    fn debug_output_leaves_the_password_out() {
        let s = ConnectionString::parse("Server=x;User ID=u;Password=hunter2").unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn an_empty_string_is_refused() {
        assert!(matches!(
            ConnectionString::parse("  "),
            Err(ConnectError::InvalidConnectionString { .. })
        ));
    }

    #[test]
    fn the_password_never_appears_in_debug_output_of_errors() {
        let err = ConnectionString::parse("Server=x;Password='secret").unwrap_err();
        assert!(!format!("{err:?}{err}").contains("secret"));
    }
}
