//! `Integrated Security=true|SSPI` (and ADO.NET's `Trusted_Connection=yes`):
//! signing in as the identity the process runs as, with no password in the
//! string. Windows builds do it through the system's SSPI (tiberius's
//! "winauth"); Linux and macOS builds through GSSAPI/Kerberos when built with
//! feature "integrated-auth-gssapi" (tiberius's feature of that name), with
//! the ticket `kinit` or a keytab put in the credential cache. A build that
//! has neither refuses the string when it is read, saying which build can.

use tiberius::AuthMethod;

/// The builds that can, for the refusal of one that cannot.
pub(crate) const BUILDS_THAT_CAN: &str = "a Windows build (through SSPI), or on Linux and macOS a build with \
feature integrated-auth-gssapi (`cargo install fencepost --locked --features integrated-auth-gssapi`, which needs \
MIT Kerberos's GSSAPI headers and libclang to build: Debian's libkrb5-dev and libclang-dev)";

/// The driver's sign-in for an integrated string, as tiberius's own parser
/// picks it: the running account. (A User ID and Password beside
/// `Integrated Security`, which SSPI would sign in as, are refused when the
/// string is read: keys.rs.)
#[cfg(windows)]
pub(crate) fn method(user: Option<&str>, password: Option<&str>) -> Option<AuthMethod> {
    Some(match (user, password) {
        (None, None) => AuthMethod::Integrated,
        _ => AuthMethod::windows(user.unwrap_or(""), password.unwrap_or("")),
    })
}

/// The driver's sign-in for an integrated string, as tiberius's own parser
/// picks it: through GSSAPI always the ticket in the credential cache; a
/// User ID is ignored, as ADO.NET ignores it.
#[cfg(all(unix, feature = "integrated-auth-gssapi"))]
pub(crate) fn method(_user: Option<&str>, _password: Option<&str>) -> Option<AuthMethod> {
    Some(AuthMethod::Integrated)
}

/// This build cannot sign in as the running identity.
#[cfg(not(any(windows, all(unix, feature = "integrated-auth-gssapi"))))]
pub(crate) fn method(_user: Option<&str>, _password: Option<&str>) -> Option<AuthMethod> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::ConnectionString;

    /// Every spelling that asks for the running identity, and the key its
    /// refusal names.
    const INTEGRATED: [(&str, &str); 5] = [
        ("Server=x;Database=app;Integrated Security=true", "Integrated Security"),
        ("Server=x;Database=app;Integrated Security=SSPI", "Integrated Security"),
        ("Server=x;Database=app;IntegratedSecurity=yes", "Integrated Security"),
        ("Server=x;Database=app;Trusted_Connection=yes", "Trusted_Connection"),
        (
            "jdbc:sqlserver://x:1433;databaseName=app;integratedSecurity=true",
            "integratedSecurity",
        ),
    ];

    #[test]
    #[cfg(all(unix, feature = "integrated-auth-gssapi"))]
    fn through_gssapi_every_integrated_string_signs_in_with_the_credential_cache() {
        assert_eq!(method(Some("svc"), None), Some(AuthMethod::Integrated));
        for (text, _) in INTEGRATED {
            let s = ConnectionString::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(
                format!("{:?}", s.config).contains("auth: Integrated"),
                "{text}: {:?}",
                s.config
            );
            assert_eq!(s.database(), "app");
        }
        // A User ID beside it would be another identity on Windows: refused.
        let with_user =
            ConnectionString::parse("Server=x;Integrated Security=SSPI;User ID=svc;Password=p").unwrap_err();
        assert!(with_user.to_string().contains("User ID"), "{with_user}");
    }

    #[test]
    #[cfg(all(unix, feature = "integrated-auth-gssapi"))]
    fn the_method_is_the_one_the_driver_s_own_parser_picks() {
        for text in ["Server=x;Integrated Security=SSPI", "Server=x;IntegratedSecurity=true"] {
            let ours = ConnectionString::parse(text).unwrap();
            let drivers = tiberius::Config::from_ado_string(text).unwrap();
            assert_eq!(format!("{:?}", ours.config), format!("{drivers:?}"), "{text}");
        }
    }

    #[test]
    #[cfg(all(unix, feature = "integrated-auth-gssapi"))]
    fn a_token_beside_integrated_security_is_refused() {
        let mut s = ConnectionString::parse("Server=x;Integrated Security=SSPI").unwrap();
        let err = s.set_access_token("eyJ0eXAi.token").unwrap_err().to_string();
        assert!(err.contains("Integrated Security"), "{err}");
    }

    #[test]
    #[cfg(not(any(windows, all(unix, feature = "integrated-auth-gssapi"))))]
    fn a_build_without_it_refuses_every_integrated_string_naming_the_builds_that_can() {
        assert!(method(None, None).is_none());
        for (text, key) in INTEGRATED {
            let err = ConnectionString::parse(text).unwrap_err();
            let crate::connection::ConnectError::IntegratedSignInNotBuilt { key: named, .. } = &err else {
                panic!("{text}: {err:?}");
            };
            assert_eq!(*named, key, "{text}");
            let said = err.to_string();
            assert!(
                said.contains("integrated-auth-gssapi") && said.contains("Windows build"),
                "{text}: {said}"
            );
            assert!(
                said.contains("User ID and Password") && said.contains("FENCEPOST_ACCESS_TOKEN"),
                "{text}: {said}"
            );
        }
    }
}
