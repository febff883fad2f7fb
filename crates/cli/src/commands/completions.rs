//! `kinetic completions SHELL`: the shell completion script for bash, zsh
//! or fish, generated from the command line's own definitions (clap), so
//! it never lags behind a new command or flag.

use clap_complete::Shell;

use crate::error::CliError;
use crate::render::emit;

/// Arguments of `kinetic completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Install it with, for instance:
  bash: kinetic completions bash > ~/.local/share/bash-completion/completions/kinetic
  zsh:  kinetic completions zsh > ~/.zfunc/_kinetic   (with fpath+=~/.zfunc before compinit)
  fish: kinetic completions fish > ~/.config/fish/completions/kinetic.fish")]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh or fish.
    #[arg(value_parser = ["bash", "zsh", "fish"])]
    shell: String,
}

/// Print the completion script of `cli` (the whole command line) for the
/// shell asked.
pub(crate) fn run(args: &CompletionsArgs, mut cli: clap::Command) -> Result<(), CliError> {
    let shell = match args.shell.as_str() {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        other => {
            return Err(CliError::usage(format!(
                "{other:?} is not a shell kinetic completes: expected bash, zsh or fish"
            )));
        }
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "kinetic", &mut script);
    Ok(emit(&String::from_utf8_lossy(&script))?)
}
