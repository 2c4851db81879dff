//! What a correct deployment looks like: the fence schema, the shipped
//! procedures, which role may execute which, and who counts as a service.

use serde::{Deserialize, Serialize};

/// The layout the rules hold a catalog against. [`Policy::default`] is the v1
/// contract; add principals the catalog cannot show to be services (logins
/// used by services outside the fence roles) with [`Policy::add_principal`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The schema that holds the fence tables and is granted to nobody.
    pub fence_schema: String,
    /// Tables in `fence_schema` that the rules name even when the catalog
    /// does not list them; every table found in that schema counts as well.
    pub fence_tables: Vec<String>,
    /// Schemas that hold the shipped procedures.
    pub code_schemas: Vec<String>,
    /// The shipped procedures and the roles each is granted to.
    pub procedures: Vec<ShippedProcedure>,
    /// The fence roles; they and their members are service principals.
    pub service_roles: Vec<String>,
    /// Further service principals (`--principal`).
    pub principals: Vec<String>,
    /// Principals trusted to write the fence and change its code: the
    /// reachability rule (FP027) lists them and their paths instead of
    /// reporting them. Database principals or logins, by name; a member of
    /// a trusted role, or the login of a trusted user, is trusted as it.
    /// `dbo` and `db_owner` by default; the deployer and named admins with
    /// `--trust`.
    #[serde(default = "default_trusted")]
    pub trusted: Vec<String>,
}

fn default_trusted() -> Vec<String> {
    vec!["dbo".into(), "db_owner".into()]
}

/// A procedure that ships with fencepost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShippedProcedure {
    /// `schema.name`.
    pub name: String,
    /// The fence roles granted EXECUTE on it.
    pub granted_to: Vec<String>,
}

const SERVICE: &str = "fence_service";
const READER: &str = "fence_reader";
const OPERATOR: &str = "fence_operator";
const RECOVERY: &str = "fence_recovery";

impl Default for Policy {
    fn default() -> Self {
        let api = |name: &str, roles: &[&str]| ShippedProcedure {
            name: name.into(),
            granted_to: roles.iter().map(|r| r.to_string()).collect(),
        };
        Self {
            fence_schema: "fence".into(),
            fence_tables: [
                "Resource",
                "PublishedOperation",
                "Tenure",
                "Recovery",
                "Anchor",
                "DatabaseIdentity",
                "Deployment",
                "DeployedProcedure",
                "SchemaHistory",
                "Retirement",
            ]
            .map(String::from)
            .to_vec(),
            code_schemas: vec!["fence_api".into(), "fence_admin".into()],
            procedures: vec![
                api("fence_api.Provision", &[SERVICE]),
                api("fence_api.Acquire", &[SERVICE]),
                api("fence_api.Renew", &[SERVICE]),
                api("fence_api.RenewMany", &[SERVICE]),
                api("fence_api.Publish", &[SERVICE]),
                api("fence_api.Release", &[SERVICE]),
                api("fence_api.GetOutcome", &[SERVICE]),
                api("fence_api.ReadPublication", &[SERVICE, READER]),
                api("fence_api.Inspect", &[SERVICE, READER]),
                api("fence_api.AssertHolder", &[SERVICE]),
                api("fence_api.AcquireSet", &[SERVICE]),
                api("fence_api.RenewSet", &[SERVICE]),
                api("fence_api.ReleaseSet", &[SERVICE]),
                api("fence_api.PublishSet", &[SERVICE]),
                api("fence_api.AssertHolderSet", &[SERVICE]),
                api("fence_api.AcquireSlot", &[SERVICE]),
                api("fence_api.ContractVersion", &[SERVICE, READER]),
                api("fence_admin.ForceRelease", &[OPERATOR]),
                api("fence_admin.ListLeases", &[OPERATOR, RECOVERY]),
                api("fence_admin.LeaseHistory", &[OPERATOR, READER, RECOVERY]),
                api("fence_admin.PruneTenure", &[RECOVERY]),
                api("fence_admin.Recover", &[RECOVERY]),
                api("fence_admin.ResetSourceVersion", &[OPERATOR]),
                api("fence_admin.Retire", &[OPERATOR]),
                api("fence_admin.PruneOutcomes", &[RECOVERY]),
            ],
            service_roles: vec![SERVICE.into(), READER.into(), OPERATOR.into(), RECOVERY.into()],
            principals: Vec::new(),
            trusted: default_trusted(),
        }
    }
}

impl Policy {
    /// Counts `name` (a database user or role) as a service principal too.
    pub fn add_principal(&mut self, name: impl Into<String>) -> &mut Self {
        self.principals.push(name.into());
        self
    }

    /// Trusts `name` (a database principal or a login) to reach the fence:
    /// the report lists it with its path instead of a finding.
    pub fn add_trusted(&mut self, name: impl Into<String>) -> &mut Self {
        self.trusted.push(name.into());
        self
    }

    /// Whether the policy names `name` as trusted.
    pub fn trusts(&self, name: &str) -> bool {
        self.trusted.iter().any(|t| t.eq_ignore_ascii_case(name))
    }

    /// The `--principal` names that match no principal of `catalog` and no
    /// login behind one (matched by SID): a typo there would otherwise leave
    /// a service unchecked.
    pub fn unknown_principals<'p>(&'p self, catalog: &super::Catalog) -> Vec<&'p str> {
        self.principals
            .iter()
            .filter(|name| catalog.principal_or_login(name).is_none())
            .map(String::as_str)
            .collect()
    }

    /// The shipped procedure called `schema.name`, if there is one.
    pub fn procedure(&self, qualified: &str) -> Option<&ShippedProcedure> {
        self.procedures.iter().find(|p| p.name.eq_ignore_ascii_case(qualified))
    }

    /// Whether `schema` is the fence schema or one of the code schemas.
    pub fn is_fence_scoped_schema(&self, schema: &str) -> bool {
        schema.eq_ignore_ascii_case(&self.fence_schema)
            || self.code_schemas.iter().any(|s| s.eq_ignore_ascii_case(schema))
    }

    /// The grants a deploy makes, as (role, procedure).
    pub fn expected_grants(&self) -> impl Iterator<Item = (&str, &str)> {
        self.procedures
            .iter()
            .flat_map(|p| p.granted_to.iter().map(move |r| (r.as_str(), p.name.as_str())))
    }
}
