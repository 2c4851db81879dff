//! `fencepost script`.

use anyhow::{Context, Result};
use fencepost::deploy::render_script;

use super::opt::ScriptArgs;
use super::{EXIT_OK, sources};

pub fn run(args: ScriptArgs) -> Result<u8> {
    let script = render_script(&sources(args.source.source_dir.as_deref())?);
    match &args.output {
        None => print!("{script}"),
        Some(path) => {
            std::fs::write(path, &script).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote the deployment script to {}", path.display());
        }
    }
    Ok(EXIT_OK)
}
