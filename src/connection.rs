//! Opening a TDS connection from an ADO.NET connection string, with failures
//! sorted into what the operator has to fix.

use std::time::Duration;

use tiberius::{Client, Config};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

/// An open TDS connection.
pub type Connection = Client<Compat<TcpStream>>;

/// How long to wait for TCP, TLS and login together unless the connection
/// string says otherwise (`Connect Timeout`, as in ADO.NET).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// SQL Server error numbers that mean "the login failed".
const LOGIN_FAILED: u32 = 18456;
/// "Cannot open database requested by the login." (SQL Server), and
/// "database does not exist" (Babelfish answers a missing database so).
const CANNOT_OPEN_DATABASE: [u32; 2] = [4060, 911];

/// Why a connection could not be opened. Each variant names what to fix; none
/// of them carries the password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection string could not be parsed.
    #[error("invalid connection string: {reason}")]
    InvalidConnectionString {
        /// What was wrong with it.
        reason: String,
    },
    /// Nothing answered at the address.
    #[error("cannot reach {server}: {reason} (check Server=host,port and that the server accepts TCP)")]
    Unreachable {
        /// `host:port` that was tried.
        server: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The server did not complete the connection in time.
    #[error("{server} did not answer within {}s (check the address, firewall and Encrypt setting)", .after.as_secs())]
    TimedOut {
        /// `host:port` that was tried.
        server: String,
        /// How long we waited.
        after: Duration,
    },
    /// The TLS handshake failed.
    #[error("TLS with {server} failed: {reason} (check Encrypt and TrustServerCertificate)")]
    Tls {
        /// `host:port` that was tried.
        server: String,
        /// The TLS library's reason.
        reason: String,
    },
    /// The server refused the credentials.
    #[error("login failed for user '{user}' on {server} (check User ID and Password)")]
    LoginFailed {
        /// `host:port` that was tried.
        server: String,
        /// The login name given.
        user: String,
    },
    /// The login worked but the database cannot be opened.
    #[error("cannot open database '{database}' on {server}: it does not exist or the login may not use it")]
    DatabaseUnavailable {
        /// `host:port` that was tried.
        server: String,
        /// The database requested.
        database: String,
    },
    /// Anything else the driver reported while connecting.
    #[error("cannot connect to {server}")]
    Other {
        /// `host:port` that was tried.
        server: String,
        /// The driver's error.
        #[source]
        source: tiberius::error::Error,
    },
}

/// A parsed connection string: the driver configuration plus the few fields
/// fencepost reports in messages or applies itself. Its `Debug` output leaves
/// the credentials out.
#[derive(Clone)]
pub struct ConnectionString {
    config: Config,
    user: String,
    database: String,
    connect_timeout: Duration,
}

impl std::fmt::Debug for ConnectionString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionString")
            .field("server", &self.server())
            .field("database", &self.database)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl ConnectionString {
    /// Parses an ADO.NET connection string such as
    /// `Server=tcp:db,1433;Database=app;User ID=deploy;Password=...;Encrypt=true`.
    pub fn parse(ado: &str) -> Result<Self, ConnectError> {
        let invalid = |reason: String| ConnectError::InvalidConnectionString { reason };
        if ado.trim().is_empty() {
            return Err(invalid("it is empty".into()));
        }
        let pairs = parse_pairs(ado).map_err(invalid)?;
        let config = Config::from_ado_string(ado).map_err(|e| invalid(e.to_string()))?;
        let lookup = |names: &[&str]| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| names.contains(&k.as_str()))
                .map(|(_, v)| v.clone())
        };
        let connect_timeout = match lookup(&["connect timeout", "connection timeout", "timeout"]) {
            None => DEFAULT_CONNECT_TIMEOUT,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| *s > 0)
                .map(Duration::from_secs)
                .ok_or_else(|| {
                    invalid(format!(
                        "Connect Timeout must be a positive number of seconds, not '{v}'"
                    ))
                })?,
        };
        Ok(Self {
            config,
            user: lookup(&["user id", "uid", "user", "username"]).unwrap_or_default(),
            database: lookup(&["database", "initial catalog"]).unwrap_or_else(|| "master".into()),
            connect_timeout,
        })
    }

    /// The `host:port` this string points at.
    pub fn server(&self) -> String {
        self.config.get_addr()
    }

    /// The database named by the string (`master` when none is).
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The same connection string pointed at another database.
    pub fn with_database(&self, database: &str) -> Self {
        let mut copy = self.clone();
        copy.config.database(database);
        copy.database = database.to_string();
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

    /// Opens a connection, following one Azure SQL gateway redirect.
    pub async fn connect(&self) -> Result<Connection, ConnectError> {
        let server = self.server();
        let attempt = async {
            match self.open(self.config.clone()).await {
                Err(tiberius::error::Error::Routing { host, port }) => {
                    let mut redirected = self.config.clone();
                    redirected.host(&host);
                    redirected.port(port);
                    self.open(redirected).await
                }
                other => other,
            }
        };
        match tokio::time::timeout(self.connect_timeout, attempt).await {
            Err(_) => Err(ConnectError::TimedOut {
                server,
                after: self.connect_timeout,
            }),
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(error)) => Err(self.classify(server, error)),
        }
    }

    async fn open(&self, mut config: Config) -> tiberius::Result<Connection> {
        config.handshake_timeout(Some(self.connect_timeout));
        let tcp = TcpStream::connect(config.get_addr()).await?;
        tcp.set_nodelay(true)?;
        Client::connect(config, tcp.compat_write()).await
    }

    fn classify(&self, server: String, error: tiberius::error::Error) -> ConnectError {
        use tiberius::error::Error;
        match error {
            Error::Io { message, .. } => ConnectError::Unreachable {
                server,
                reason: message,
            },
            Error::Tls(reason) => ConnectError::Tls { server, reason },
            Error::Server(ref e) if e.code() == LOGIN_FAILED => ConnectError::LoginFailed {
                server,
                user: self.user.clone(),
            },
            Error::Server(ref e) if CANNOT_OPEN_DATABASE.contains(&e.code()) => ConnectError::DatabaseUnavailable {
                server,
                database: self.database.clone(),
            },
            source => ConnectError::Other { server, source },
        }
    }
}

/// Splits `key=value;...` into lower-cased keys and unquoted values, honouring
/// ADO.NET's quoting ('...', "..." or {...}, the closing mark doubled inside).
fn parse_pairs(ado: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut rest = ado;
    while !rest.trim().is_empty() {
        let eq = rest.find('=').ok_or_else(|| {
            format!(
                "'{}' has no '=' (expected key=value pairs separated by ';')",
                rest.trim()
            )
        })?;
        let key = rest[..eq].trim().trim_start_matches(';').trim().to_ascii_lowercase();
        let after = rest[eq + 1..].trim_start();
        let (value, remainder) = match after.chars().next() {
            Some(quote @ ('\'' | '"')) => take_quoted(after, quote)
                .ok_or_else(|| format!("the value of '{key}' has an unclosed {quote} quote"))?,
            Some('{') => {
                take_quoted(after, '}').ok_or_else(|| format!("the value of '{key}' has an unclosed {{ brace"))?
            }
            _ => match after.find(';') {
                Some(end) => (after[..end].trim().to_string(), &after[end + 1..]),
                None => (after.trim().to_string(), ""),
            },
        };
        pairs.push((key, value));
        rest = remainder;
    }
    Ok(pairs)
}

/// Reads a quoted value (`s` starts at its opening mark) up to `close`, where a
/// doubled `close` stands for itself.
fn take_quoted(s: &str, close: char) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if c != close {
            value.push(c);
        } else if chars.peek().map(|(_, n)| *n) == Some(close) {
            value.push(close);
            chars.next();
        } else {
            let rest = &s[i + 1..];
            let rest = rest.trim_start();
            return Some((value, rest.strip_prefix(';').unwrap_or(rest)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn quoted_values_keep_semicolons_and_doubled_quotes() {
        let pairs = parse_pairs(r#"a="x;""y";b=2;c={p;w}}d}"#).unwrap();
        assert_eq!(
            pairs,
            vec![
                ("a".into(), "x;\"y".into()),
                ("b".into(), "2".into()),
                ("c".into(), "p;w}d".into())
            ]
        );
    }

    #[test]
    fn a_bad_timeout_is_refused_with_the_key_named() {
        let err = ConnectionString::parse("Server=x;Connect Timeout=soon").unwrap_err();
        assert!(err.to_string().contains("Connect Timeout"), "{err}");
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
