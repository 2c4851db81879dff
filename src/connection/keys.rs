//! A connection string's keys, read as tiberius reads them: the same
//! tokenizer (ADO.NET: tiberius's rules; JDBC: the `connection-string` crate
//! tiberius uses) and the same "last duplicate wins"; among synonyms
//! (`uid` and `User ID`, `Database` and `Initial Catalog`, `Server` and
//! `Data Source`) the last written wins, as in ADO.NET, where tiberius takes
//! the first. What fencepost reports or applies itself (user, database,
//! server, timeout, how to sign in) comes from here, and the connection sets
//! each on the driver's configuration, so the driver's order never decides.

use std::collections::HashMap;
use std::time::Duration;

/// The variable and file flag that carry an access token, and where to get one.
pub(crate) const TOKEN_ADVICE: &str = "sign in with an access token instead: set FENCEPOST_ACCESS_TOKEN \
(or pass --access-token-file) to a token from `az account get-access-token --resource \
https://database.windows.net/ --query accessToken -o tsv`, and leave User ID and Password out";

/// How the string asks to sign in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SignIn {
    /// A SQL login (User ID and Password), the default.
    SqlLogin,
    /// A Microsoft Entra ID access token handed over separately
    /// (`Authentication=ActiveDirectoryAccessToken`).
    AccessToken,
    /// The identity the process runs as (`Integrated Security=true|SSPI`,
    /// `Trusted_Connection=yes`): Windows SSPI, or Kerberos through GSSAPI.
    /// Whether this build can is `integrated::method`'s answer.
    Integrated,
}

/// The lower-cased keys of a connection string and their unquoted values.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    pairs: HashMap<String, String>,
    /// Where each key last appears (ADO.NET strings): among synonyms ADO.NET
    /// treats as one key, the last written wins.
    order: HashMap<String, usize>,
    jdbc: Option<JdbcServer>,
}

#[derive(Clone, Debug)]
struct JdbcServer {
    host: Option<String>,
    instance: Option<String>,
    port: Option<u16>,
}

/// The server part of a string: host, named instance and explicit port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerName {
    pub(crate) host: String,
    pub(crate) instance: Option<String>,
    pub(crate) port: Option<u16>,
}

impl ServerName {
    /// `host:port` as tiberius dials it (1434, the SQL Browser, for a named
    /// instance without a port).
    pub(crate) fn addr(&self) -> String {
        let port = self.port.unwrap_or(if self.instance.is_some() { 1434 } else { 1433 });
        format!("{}:{port}", self.host)
    }

    /// How messages name the server: `host\INSTANCE` while its port is to be
    /// asked of the SQL Browser, `host:port` otherwise.
    pub(crate) fn display(&self) -> String {
        match (&self.instance, self.port) {
            (Some(instance), None) => format!("{}\\{instance}", self.host),
            _ => self.addr(),
        }
    }
}

/// Whether `s` is a JDBC URL rather than an ADO.NET string.
pub(crate) fn is_jdbc(s: &str) -> bool {
    s.trim_start().get(..5).is_some_and(|p| p.eq_ignore_ascii_case("jdbc:"))
}

impl Keys {
    /// Tokenizes an ADO.NET string or a JDBC URL.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        if is_jdbc(s) {
            let url: connection_string::JdbcString = s.trim().parse().map_err(|e: connection_string::Error| {
                let e = e.to_string();
                format!(
                    "{} (expected jdbc:sqlserver://host:port;key=value;..., a value holding ';' in braces: password={{p;w}})",
                    e.strip_prefix("Conversion error: ").unwrap_or(&e)
                )
            })?;
            Ok(Self {
                pairs: url.properties().clone(),
                order: HashMap::new(),
                jdbc: Some(JdbcServer {
                    host: url.server_name().map(str::to_string),
                    instance: url.instance_name().map(str::to_string),
                    port: url.port(),
                }),
            })
        } else {
            let (pairs, order) = parse_ado(s)?;
            Ok(Self {
                pairs,
                order,
                jdbc: None,
            })
        }
    }

    /// The value of the synonym of `names` written last: ADO.NET reads a
    /// group of synonyms as one key, and the last occurrence wins (within
    /// one spelling the last duplicate has already won). A JDBC URL keeps no
    /// order: the first of `names` present.
    fn first(&self, names: &[&'static str]) -> Option<&str> {
        self.last_written(names)
            .and_then(|key| self.pairs.get(key))
            .map(String::as_str)
    }

    /// The spellings of the server's address: ADO.NET reads all five.
    const SERVER: [&'static str; 5] = ["server", "data source", "addr", "address", "network address"];

    /// The groups of spellings ADO.NET (or tiberius) reads as one key.
    const SYNONYMS: [&'static [&'static str]; 10] = [
        &["uid", "username", "user", "user id"],
        &["password", "pwd"],
        &Self::INTEGRATED,
        &["database", "initial catalog", "databasename"],
        &Self::SERVER,
        &["connect timeout", "connection timeout", "timeout", "logintimeout"],
        &["application name", "applicationname"],
        &[
            "hostnameincertificate",
            "hostname in certificate",
            "host name in certificate",
        ],
        &["workstationid", "workstation id"],
        &["trustservercertificate", "trust server certificate"],
    ];

    /// Spellings ADO.NET reads that the driver does not, and the driver's
    /// spelling of the same key: the driver string names the key so, or the
    /// driver would not see it (a `Trust Server Certificate=false` written
    /// after `TrustServerCertificate=true` would leave the certificate
    /// unchecked).
    const DRIVER_SPELLING: [(&'static str, &'static str); 5] = [
        ("addr", "server"),
        ("address", "server"),
        ("network address", "server"),
        ("host name in certificate", "hostnameincertificate"),
        ("trust server certificate", "trustservercertificate"),
    ];

    /// The ADO.NET string as the driver is to read it: every key, less the
    /// spellings of a synonym group that a later one overrides (the driver
    /// would take the first), each value quoted as the driver unquotes it.
    /// `None` for a JDBC URL, which has one spelling per key.
    pub(crate) fn driver_string(&self) -> Option<String> {
        if self.jdbc.is_some() {
            return None;
        }
        let overridden = |key: &str| {
            Self::SYNONYMS
                .iter()
                .find(|group| group.contains(&key))
                .is_some_and(|group| self.last_written(group) != Some(key))
        };
        let mut keys: Vec<&String> = self.pairs.keys().filter(|key| !overridden(key)).collect();
        keys.sort_by_key(|key| self.order.get(*key).copied().unwrap_or(0));
        Some(
            keys.iter()
                .map(|key| {
                    let name = Self::DRIVER_SPELLING
                        .iter()
                        .find(|(ado, _)| *ado == key.as_str())
                        .map_or(key.as_str(), |(_, driver)| *driver);
                    format!(
                        "{}='{}';",
                        name.replace('=', "=="),
                        self.pairs[*key].replace('\'', "''")
                    )
                })
                .collect(),
        )
    }

    /// The login name: the last of its spellings.
    pub(crate) fn user(&self) -> Option<&str> {
        self.first(&["uid", "username", "user", "user id"])
    }

    /// The login name, unless empty.
    pub(crate) fn given_user(&self) -> Option<&str> {
        self.user().filter(|u| !u.is_empty())
    }

    /// The password, unless empty.
    pub(crate) fn given_password(&self) -> Option<&str> {
        self.password().filter(|p| !p.is_empty())
    }

    /// Whether a password is given.
    pub(crate) fn has_password(&self) -> bool {
        self.first(&["password", "pwd"]).is_some()
    }

    /// The database: the last of its spellings.
    pub(crate) fn database(&self) -> Option<&str> {
        self.first(&["database", "initial catalog", "databasename"])
    }

    /// The server: `Server`/`Data Source` (`tcp:host,port`, `host\INSTANCE`)
    /// or the JDBC URL's `//host\INSTANCE:port`.
    pub(crate) fn server(&self) -> Result<ServerName, String> {
        if let Some(jdbc) = &self.jdbc {
            return Ok(ServerName {
                host: jdbc.host.clone().unwrap_or_else(|| "localhost".into()),
                instance: jdbc.instance.clone(),
                port: jdbc.port,
            });
        }
        let Some(value) = self.first(&Self::SERVER) else {
            return Ok(ServerName {
                host: "localhost".into(),
                instance: None,
                port: None,
            });
        };
        let value = value.strip_prefix("tcp:").unwrap_or(value);
        let parts: Vec<&str> = value.split(',').collect();
        if parts.len() > 2 {
            return Err(format!(
                "Server='{value}' has more than one ',' (expected host, host,port or host\\instance)"
            ));
        }
        let port = match parts.get(1) {
            None => None,
            Some(p) => Some(
                p.trim()
                    .parse::<u16>()
                    .map_err(|_| format!("the port in Server='{value}' is not a number from 0 to 65535"))?,
            ),
        };
        let mut host_instance = parts[0].split('\\');
        let host = host_instance.next().unwrap_or_default().replace("(local)", "localhost");
        let instance = host_instance.next().map(str::to_string);
        Ok(ServerName { host, instance, port })
    }

    /// `Connect Timeout` (or a synonym; JDBC `loginTimeout`), in seconds, at
    /// most `max`.
    pub(crate) fn connect_timeout(&self, max: Duration) -> Result<Option<Duration>, String> {
        let Some(v) = self.first(&["connect timeout", "connection timeout", "timeout", "logintimeout"]) else {
            return Ok(None);
        };
        let max_seconds = max.as_secs();
        v.trim()
            .parse::<u64>()
            .ok()
            .filter(|s| (1..=max_seconds).contains(s))
            .map(|s| Some(Duration::from_secs(s)))
            .ok_or_else(|| {
                format!("Connect Timeout must be a whole number of seconds from 1 to {max_seconds}, not '{v}'")
            })
    }

    /// The `Authentication` value as written.
    pub(crate) fn authentication(&self) -> Option<&str> {
        self.pairs.get("authentication").map(String::as_str)
    }

    /// The spellings of `Integrated Security`, which ADO.NET reads as one key.
    const INTEGRATED: [&'static str; 3] = ["integrated security", "integratedsecurity", "trusted_connection"];

    /// The key of `names` written last (ADO.NET: synonyms are one key, and
    /// the last occurrence wins); the first present where the string keeps
    /// no order (JDBC, which has one spelling).
    fn last_written(&self, names: &[&'static str]) -> Option<&'static str> {
        let present = names.iter().copied().filter(|n| self.pairs.contains_key(*n));
        match self.order.is_empty() {
            true => present.into_iter().next(),
            false => present.max_by_key(|n| self.order.get(*n).copied().unwrap_or(0)),
        }
    }

    /// The `Integrated Security` (or `Trusted_Connection`) value as written.
    pub(crate) fn integrated_security(&self) -> Option<&str> {
        self.last_written(&Self::INTEGRATED)
            .and_then(|key| self.pairs.get(key))
            .map(String::as_str)
    }

    /// The key [`integrated_security`](Self::integrated_security) read, as
    /// the string's dialect spells it.
    pub(crate) fn integrated_security_key(&self) -> &'static str {
        let trusted = self.last_written(&Self::INTEGRATED) == Some("trusted_connection");
        match (self.jdbc.is_some(), trusted) {
            (_, true) => "Trusted_Connection",
            (true, false) => "integratedSecurity",
            (false, false) => "Integrated Security",
        }
    }

    /// The password: the last of its spellings.
    pub(crate) fn password(&self) -> Option<&str> {
        self.first(&["password", "pwd"])
    }

    /// How the string asks to sign in, or why it cannot be read; whether
    /// this build can sign in so is the caller's to judge.
    pub(crate) fn sign_in(&self) -> Result<SignIn, String> {
        if let Some(v) = self.integrated_security() {
            let normal = v.trim().to_ascii_lowercase();
            match normal.as_str() {
                "false" | "no" => {}
                "true" | "yes" | "sspi" => return self.integrated(),
                _ => return Err(format!("Integrated Security must be true, false or SSPI, not '{v}'")),
            }
        }
        let Some(v) = self.pairs.get("authentication") else {
            return Ok(SignIn::SqlLogin);
        };
        let normal: String = v
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '-' && *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        match normal.as_str() {
            "sqlpassword" | "notspecified" => Ok(SignIn::SqlLogin),
            "activedirectoryaccesstoken" | "accesstoken" => Ok(SignIn::AccessToken),
            _ => Err(format!(
                "Authentication={v} needs a Microsoft Entra ID library this build does not have; {TOKEN_ADVICE}"
            )),
        }
    }
}

impl Keys {
    /// An integrated sign-in, unless the string says more than one identity
    /// or a scheme this build does not have.
    fn integrated(&self) -> Result<SignIn, String> {
        // JDBC: NTLM is a sign-in of its own, not the Kerberos this build does.
        if let Some(scheme) = self.pairs.get("authenticationscheme")
            && scheme.trim().eq_ignore_ascii_case("ntlm")
        {
            return Err(
                "authenticationScheme=NTLM is not supported: fencepost signs in with integratedSecurity \
                        through SSPI on Windows or Kerberos elsewhere (leave authenticationScheme out, or use \
                        JavaKerberos); or use a SQL login or an access token"
                    .into(),
            );
        }
        // ADO.NET refuses any Authentication beside Integrated Security but
        // NotSpecified: the string would ask for two ways of signing in.
        if let Some(v) = self.authentication()
            && !v.trim().eq_ignore_ascii_case("notspecified")
        {
            return Err(format!(
                "Authentication={v} and Integrated Security both say how to sign in: leave Authentication out to \
                 sign in as the running identity, or leave Integrated Security out"
            ));
        }
        // On Windows SSPI signs in as a User ID given beside it; Kerberos
        // ignores it: one string, two identities. Empty, they name none.
        if self.given_user().is_some() || self.given_password().is_some() {
            return Err(
                "Integrated Security signs in as the identity the process runs as, and the string also \
                        gives a User ID or Password: leave User ID and Password out to sign in as the running \
                        identity, or leave Integrated Security out to sign in as the SQL login"
                    .into(),
            );
        }
        Ok(SignIn::Integrated)
    }
}

/// Tokenizes an ADO.NET string by tiberius's rules: `;`-separated pairs split
/// on the first `=` (`==` in a key is a literal `=`), keys trimmed and
/// lower-cased, values quoted with '…' or "…" (the quote doubled inside) or
/// {…} (up to the first `}`), unquoted values trimmed, ASCII only, and the
/// last of duplicate keys wins, as in ADO.NET.
type AdoPairs = (HashMap<String, String>, HashMap<String, usize>);

fn parse_ado(input: &str) -> Result<AdoPairs, String> {
    if !input.is_ascii() {
        return Err("it contains non-ASCII characters".into());
    }
    let b = input.as_bytes();
    let n = b.len();
    let mut i = 0;
    let mut pairs = HashMap::new();
    let mut order = HashMap::new();
    let mut position = 0;
    while i < n {
        while i < n && (b[i] == b';' || b[i].is_ascii_whitespace()) {
            i += 1;
        }
        if i >= n {
            break;
        }
        let mut key = String::new();
        loop {
            if i >= n || b[i] == b';' {
                // Said by its place, never its text: it may be the rest of
                // a password that holds an unquoted ';'.
                return Err(format!(
                    "its part {} (counting from 1) has no '=': expected key=value pairs separated by ';', \
                     and a value that holds ';' quoted ('…' or \"…\")",
                    position + 1
                ));
            }
            if b[i] == b'=' {
                if i + 1 < n && b[i + 1] == b'=' {
                    key.push('=');
                    i += 2;
                    continue;
                }
                i += 1;
                break;
            }
            key.push(b[i] as char);
            i += 1;
        }
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty() {
            return Err("a key is empty".into());
        }
        while i < n && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let value = if i < n && (b[i] == b'\'' || b[i] == b'"') {
            let quote = b[i];
            i += 1;
            let mut v = String::new();
            loop {
                if i >= n {
                    return Err(format!("the value of '{key}' has an unclosed {} quote", quote as char));
                }
                if b[i] == quote {
                    if i + 1 < n && b[i + 1] == quote {
                        v.push(quote as char);
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                v.push(b[i] as char);
                i += 1;
            }
            skip_to_separator(b, &mut i, &key)?;
            v
        } else if i < n && b[i] == b'{' {
            i += 1;
            let mut v = String::new();
            loop {
                if i >= n {
                    return Err(format!("the value of '{key}' has an unclosed {{ brace"));
                }
                if b[i] == b'}' {
                    i += 1;
                    break;
                }
                v.push(b[i] as char);
                i += 1;
            }
            skip_to_separator(b, &mut i, &key)?;
            v
        } else {
            let start = i;
            while i < n && b[i] != b';' {
                i += 1;
            }
            input[start..i].trim_end().to_string()
        };
        order.insert(key.clone(), position);
        position += 1;
        pairs.insert(key, value);
        if i < n && b[i] == b';' {
            i += 1;
        }
    }
    Ok((pairs, order))
}

/// After a closing quote or brace only whitespace may come before `;`.
fn skip_to_separator(b: &[u8], i: &mut usize, key: &str) -> Result<(), String> {
    while *i < b.len() && b[*i] != b';' {
        if !b[*i].is_ascii_whitespace() {
            return Err(format!(
                "the value of '{key}' goes on after its closing quote or brace \
                 (a value holding '}}' must be quoted with '…' or \"…\")"
            ));
        }
        *i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ADO.NET reads `Addr`, `Address` and `Network Address` as the
    /// server and `Trust Server Certificate` as `TrustServerCertificate`:
    /// the driver is handed each under its own spelling, the last written
    /// winning.
    #[test]
    fn spellings_only_ado_net_reads_reach_the_driver_under_its_own() {
        for text in [
            "Network Address=sql-prod,1533;User ID=u;Password=p",
            "Data Source=sql-old;Address=sql-prod,1533;User ID=u;Password=p",
            "Addr=sql-prod,1533;User ID=u;Password=p",
        ] {
            let keys = Keys::parse(text).unwrap();
            let server = keys.server().unwrap();
            assert_eq!((server.host.as_str(), server.port), ("sql-prod", Some(1533)), "{text}");
            let driver = keys.driver_string().unwrap();
            assert!(driver.contains("server='sql-prod,1533';"), "{text}: {driver}");
            assert!(!driver.contains("sql-old"), "{text}: {driver}");
        }
        let keys = Keys::parse("Server=x;TrustServerCertificate=true;Trust Server Certificate=false").unwrap();
        let driver = keys.driver_string().unwrap();
        assert!(driver.contains("trustservercertificate='false';"), "{driver}");
        assert!(!driver.contains("'true'"), "{driver}");
        let config = tiberius::Config::from_ado_string(&driver).unwrap();
        assert!(format!("{config:?}").contains("bypass: false"), "{config:?}");
    }

    /// A password holding an unquoted ';' splits into a part with no '=':
    /// the error says where, and never prints that part.
    #[test]
    fn a_part_without_equals_is_named_by_its_place_not_its_text() {
        let error = Keys::parse("Password=ab;cd-secret;Server=db").unwrap_err();
        assert!(!error.contains("cd-secret"), "{error}");
        assert!(error.contains("part 2"), "{error}");
    }

    /// ADO.NET reads `Trusted_Connection` as a synonym of `Integrated
    /// Security`, and the last of a key's spellings in the string wins.
    #[test]
    fn the_last_spelling_of_integrated_security_wins_as_in_ado_net() {
        let sign_in = |text: &str| Keys::parse(text).unwrap().sign_in();
        assert_eq!(
            sign_in("Server=x;Integrated Security=true;Trusted_Connection=no;User ID=u;Password=p"),
            Ok(SignIn::SqlLogin)
        );
        assert_eq!(
            sign_in("Server=x;Trusted_Connection=no;Integrated Security=SSPI"),
            Ok(SignIn::Integrated)
        );
        assert_eq!(
            sign_in("Server=x;IntegratedSecurity=no;Trusted_Connection=yes"),
            Ok(SignIn::Integrated)
        );
        assert_eq!(
            sign_in("Server=x;Trusted_Connection=yes;Integrated Security=false;User ID=u;Password=p"),
            Ok(SignIn::SqlLogin)
        );
    }

    /// On Windows a User ID beside Integrated Security signs in as that
    /// Windows account; through Kerberos elsewhere it is ignored: the same
    /// string would be two identities, so it is refused.
    #[test]
    fn integrated_security_beside_a_user_id_or_password_is_refused() {
        for text in [
            "Server=x;Integrated Security=SSPI;User ID=svc;Password=p",
            "Server=x;Trusted_Connection=yes;uid=svc",
            "jdbc:sqlserver://x:1433;integratedSecurity=true;user=svc;password=p",
        ] {
            let err = Keys::parse(text).unwrap().sign_in().unwrap_err();
            assert!(
                err.contains("User ID") && err.contains("Integrated Security"),
                "{text}: {err}"
            );
        }
    }

    /// The password's spellings are one key too, and so is Connect Timeout's.
    #[test]
    fn the_last_spelling_of_every_synonym_group_wins() {
        let keys = Keys::parse("Server=x;pwd=first;Password=second;Connect Timeout=5;Timeout=9").unwrap();
        assert_eq!(keys.password(), Some("second"));
        assert_eq!(
            keys.connect_timeout(Duration::from_secs(60)),
            Ok(Some(Duration::from_secs(9)))
        );
        let keys = Keys::parse("Server=x;Password=second;pwd=first").unwrap();
        assert_eq!(keys.password(), Some("first"));
    }

    /// ADO.NET accepts an empty User ID and Password beside Integrated
    /// Security (they name no identity), and refuses any Authentication
    /// but NotSpecified beside it.
    #[test]
    fn integrated_security_takes_empty_credentials_and_refuses_an_authentication() {
        let sign_in = |text: &str| Keys::parse(text).unwrap().sign_in();
        assert_eq!(
            sign_in("Server=x;Integrated Security=SSPI;User ID=;Password="),
            Ok(SignIn::Integrated)
        );
        assert_eq!(
            sign_in("Server=x;Integrated Security=SSPI;Authentication=NotSpecified"),
            Ok(SignIn::Integrated)
        );
        for authentication in ["SqlPassword", "ActiveDirectoryAccessToken", "Active Directory Password"] {
            let text = format!("Server=x;Integrated Security=SSPI;Authentication={authentication}");
            let err = sign_in(&text).unwrap_err();
            assert!(
                err.contains("Authentication") && err.contains("Integrated Security"),
                "{text}: {err}"
            );
        }
    }

    /// JDBC's `authenticationScheme=NTLM` names a sign-in this build does
    /// not have; read as Integrated Security it would become Kerberos.
    #[test]
    fn jdbc_ntlm_is_refused_and_kerberos_accepted() {
        let err = Keys::parse("jdbc:sqlserver://x:1433;integratedSecurity=true;authenticationScheme=NTLM")
            .unwrap()
            .sign_in()
            .unwrap_err();
        assert!(err.contains("NTLM") && err.contains("not supported"), "{err}");
        for scheme in ["JavaKerberos", "NativeAuthentication"] {
            let text = format!("jdbc:sqlserver://x:1433;integratedSecurity=true;authenticationScheme={scheme}");
            assert_eq!(
                Keys::parse(&text).unwrap().sign_in(),
                Ok(SignIn::Integrated),
                "{scheme}"
            );
        }
    }
}
