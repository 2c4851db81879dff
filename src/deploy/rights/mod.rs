//! The rights a deploy needs, read before it changes anything: every right
//! the deploy's statements take on SQL Server ([`candidates`]), asked of the
//! server for the deploying login in the state read ([`probe`]), and filtered
//! by what the next deploy does into the rights it lacks, each with the
//! statement that grants it ([`missing`]).

mod candidates;
mod missing;
mod probe;
mod statements;

#[cfg(test)]
pub(crate) use candidates::rights_for;
#[cfg(test)]
pub(crate) use missing::take_candidate;
pub use missing::{DeployRights, MissingRight};
pub(crate) use missing::{Steps, Who, grant_statements, needed};
#[cfg(test)]
pub(crate) use probe::ProbedRight;
pub(crate) use probe::{ProbedRights, parse_probe, probe_query};
pub(crate) use statements::{Statement, Statements};
