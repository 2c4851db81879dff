//! The command-line reference as Markdown (docs/cli.md): every command's
//! help, rendered from the same clap definition as `--help` and `man`, so
//! the document cannot say what the binary does not.

/// What docs/cli.md holds: `command`'s help and its subcommands', with a
/// preface that says where it comes from.
pub fn reference_markdown(command: &clap::Command) -> String {
    let options = clap_markdown::MarkdownOptions::new()
        .title("The fencepost command line".to_string())
        .show_footer(false)
        .show_table_of_contents(true);
    let body = clap_markdown::help_markdown_command_custom(command, &options);
    let preface = "Generated from the same definitions as `fencepost --help` by `fencepost man \
                   --markdown` (`make cli-doc`); a test fails when this file and the binary differ.\n";
    // The title line first, then the preface, then the rest.
    match body.split_once('\n') {
        Some((title, rest)) => format!("{title}\n\n{preface}{rest}"),
        None => format!("{body}\n\n{preface}"),
    }
}
