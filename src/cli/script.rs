//! `fencepost script`.

use anyhow::{Context, Result, bail};
use fencepost::deploy::{
    refuse_for_sqlcmd, render_babelfish_postgres_script, render_schemas_script, render_script_with_grants,
    render_uninstall_script,
};

use super::opt::{ScriptArgs, ScriptTarget};
use super::{EXIT_OK, sources};

pub fn run(args: ScriptArgs) -> Result<u8> {
    for grant in &args.grants {
        if let Err(refusal) = refuse_for_sqlcmd(grant) {
            bail!("{refusal}");
        }
    }
    let script = match (args.target, args.database.as_deref()) {
        _ if args.schemas => render_schemas_script(&sources(args.source.source_dir.as_deref())?),
        _ if args.uninstall => render_uninstall_script(&sources(args.source.source_dir.as_deref())?),
        (ScriptTarget::Sqlcmd, None) => {
            render_script_with_grants(&sources(args.source.source_dir.as_deref())?, &args.grants)
        }
        (ScriptTarget::Sqlcmd, Some(_)) => {
            bail!(
                "--database names the database of --target babelfish-postgres; the sqlcmd script runs in the database sqlcmd connects to"
            )
        }
        (ScriptTarget::BabelfishPostgres, Some(database)) => render_babelfish_postgres_script(database),
        (ScriptTarget::BabelfishPostgres, None) => bail!("--target babelfish-postgres needs --database NAME"),
    };
    match &args.output {
        None => super::out::print(&script)?,
        Some(path) => {
            std::fs::write(path, &script).with_context(|| format!("writing {}", path.display()))?;
            super::progress(format_args!("wrote the script to {}", path.display()));
        }
    }
    Ok(EXIT_OK)
}
