//! `fencepost.toml`: named environments, in the manner of Flyway's. Each
//! names the environment variable that holds its connection string (the
//! string itself, with its password, stays out of the file) and the users it
//! adds to the fence roles:
//!
//! ```toml
//! [environments.prod]
//! connection_env = "PROD_DB_CONNECTION"
//! grants.fence_service = ["svc_reports"]
//! grants.fence_operator = ["oncall"]
//! trusted = ["deployer"]
//! accept_unverifiable = ["FP002", "FP015"]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use fencepost::deploy::Grant;
use serde::Deserialize;

/// The file read when --config is not given, if it exists.
pub const DEFAULT_FILE: &str = "fencepost.toml";

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// By name.
    #[serde(default)]
    pub environments: BTreeMap<String, Environment>,
}

/// One environment.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// The environment variable that holds the ADO.NET connection string.
    pub connection_env: String,
    /// Fence role → the database users `migrate` adds to it.
    #[serde(default)]
    pub grants: BTreeMap<String, Vec<String>>,
    /// Principals `check` trusts to reach the fence (the deployer, named
    /// admins), as `check --trust` takes them.
    #[serde(default)]
    pub trusted: Vec<String>,
    /// Rule ids whose "cannot verify" `check` accepts in this environment,
    /// as `check --accept-unverifiable` takes them (FP002 and FP015 on Azure
    /// SQL Database).
    #[serde(default)]
    pub accept_unverifiable: Vec<String>,
}

impl Environment {
    /// The grants as `migrate --grant` would take them, checked.
    pub fn grants(&self, name: &str) -> Result<Vec<Grant>> {
        let mut grants = Vec::new();
        for (role, members) in &self.grants {
            for member in members {
                let grant = Grant::parse(&format!("{role}={member}"))
                    .map_err(|reason| anyhow::anyhow!("environment {name}: grants: {reason}"))?;
                grants.push(grant);
            }
        }
        Ok(grants)
    }
}

/// Reads the file given, or `fencepost.toml` in the working directory when
/// none is given and it exists.
pub fn load(path: Option<&Path>) -> Result<Option<(PathBuf, Config)>> {
    let path = match path {
        Some(path) => path.to_path_buf(),
        None if Path::new(DEFAULT_FILE).exists() => PathBuf::from(DEFAULT_FILE),
        None => return Ok(None),
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let config = toml::from_str(&text).with_context(|| format!("{} is not a valid fencepost.toml", path.display()))?;
    Ok(Some((path, config)))
}

/// The environment `name` of the file at `path` (or the default file).
pub fn environment(path: Option<&Path>, name: &str) -> Result<Environment> {
    let Some((file, mut config)) = load(path)? else {
        bail!("--environment {name}: there is no {DEFAULT_FILE} here; give its path with --config");
    };
    match config.environments.remove(name) {
        Some(environment) => Ok(environment),
        None => {
            let known: Vec<&str> = config.environments.keys().map(String::as_str).collect();
            bail!(
                "--environment {name}: {} has no such environment (it has: {})",
                file.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_names_its_variable_and_its_grants() {
        let config: Config = toml::from_str(
            "[environments.prod]\nconnection_env = \"PROD_DB\"\ngrants.fence_service = [\"svc_a\", \"svc_b\"]\n",
        )
        .unwrap();
        let prod = &config.environments["prod"];
        assert_eq!(prod.connection_env, "PROD_DB");
        let grants: Vec<String> = prod
            .grants("prod")
            .unwrap()
            .iter()
            .map(|g| format!("{}={}", g.role, g.member))
            .collect();
        assert_eq!(grants, ["fence_service=svc_a", "fence_service=svc_b"]);
        assert!(prod.trusted.is_empty());
    }

    #[test]
    fn an_environment_names_the_principals_check_trusts() {
        let config: Config =
            toml::from_str("[environments.prod]\nconnection_env = \"PROD_DB\"\ntrusted = [\"deployer\", \"dba\"]\n")
                .unwrap();
        assert_eq!(config.environments["prod"].trusted, ["deployer", "dba"]);
    }

    #[test]
    fn an_unknown_key_or_role_is_refused_by_name() {
        let typo = toml::from_str::<Config>("[environments.prod]\nconection_env = \"X\"\n").unwrap_err();
        assert!(typo.to_string().contains("conection_env"), "{typo}");
        let config: Config =
            toml::from_str("[environments.prod]\nconnection_env = \"X\"\ngrants.db_owner = [\"svc\"]\n").unwrap();
        let error = config.environments["prod"].grants("prod").unwrap_err().to_string();
        assert!(
            error.contains("db_owner") && error.contains("not a fence role"),
            "{error}"
        );
    }
}
