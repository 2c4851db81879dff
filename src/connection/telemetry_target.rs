//! Where calls go, in the attributes of OpenTelemetry's database client
//! conventions: `db.namespace`, `server.address`, `server.port`.

use super::keys::ServerName;

/// The attributes that tell one database's calls from another's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TelemetryTarget {
    /// `db.namespace`: the database, as `{instance}|{database}` on a named
    /// instance (the conventions' form for SQL Server); `None` when the
    /// connection string names no database, since the server then opens the
    /// login's default one, which the client does not know.
    pub(crate) namespace: Option<String>,
    /// `server.address`: the host alone, without the instance name or the
    /// brackets of an IPv6 literal.
    pub(crate) address: String,
    /// `server.port`: the port dialled; `None` for a named instance whose
    /// port the SQL Browser tells.
    pub(crate) port: Option<u16>,
}

impl TelemetryTarget {
    pub(crate) fn of(server: &ServerName, database: Option<&str>) -> Self {
        let namespace = database.map(|database| match &server.instance {
            Some(instance) => format!("{instance}|{database}"),
            None => database.to_string(),
        });
        let host = server.host.as_str();
        let address = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host)
            .to_string();
        let port = match (&server.instance, server.port) {
            (_, Some(port)) => Some(port),
            (Some(_), None) => None,
            (None, None) => Some(1433),
        };
        TelemetryTarget {
            namespace,
            address,
            port,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(host: &str, instance: Option<&str>, port: Option<u16>) -> ServerName {
        ServerName {
            host: host.to_string(),
            instance: instance.map(str::to_string),
            port,
        }
    }

    #[test]
    fn a_named_instance_prefixes_the_namespace_and_stays_out_of_the_address() {
        let target = TelemetryTarget::of(&server("db", Some("SQLEXPRESS"), None), Some("app"));
        assert_eq!(target.namespace.as_deref(), Some("SQLEXPRESS|app"));
        assert_eq!(target.address, "db");
        assert_eq!(target.port, None);
    }

    #[test]
    fn no_database_named_is_no_namespace_and_an_ipv6_host_loses_its_brackets() {
        let target = TelemetryTarget::of(&server("[::1]", None, None), None);
        assert_eq!(target.namespace, None);
        assert_eq!(target.address, "::1");
        assert_eq!(target.port, Some(1433));
    }
}
