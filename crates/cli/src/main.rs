//! `kinetic`: the command-line tool over Kinetic for Rust.
//!
//! Every command that prints data accepts `--json`. Bad input gets a
//! one-line error naming the input and what is accepted, and exit code 2;
//! a failure of the work itself exits 1.
//!
//! `main` reads the process's environment once ([`engine::Invocation`]);
//! [`engine`] resolves the settings and builds the engine from them;
//! [`commands`] parse, call the engine and print through [`render`].

mod cloud;
mod commands;
mod engine;
mod entry_check;
mod error;
mod flags;
mod follow;
mod interrupt;
mod profiles;
mod render;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::engine::Invocation;
use crate::error::CliError;
use crate::render::Output;

/// Run Python functions and commands on remote TPUs, GPUs and CPUs.
#[derive(Debug, Parser)]
#[command(
    name = "kinetic",
    version,
    about,
    propagate_version = true,
    after_help = "Examples:\n  kinetic run train.py:main --accelerator l4     run a function on a GPU, print its value\n  kinetic map work:square --inputs xs.jsonl       one job per input line\n  kinetic up --project P --zone us-central1-a     create the cluster jobs run on\n  kinetic doctor                                  check what a first job needs"
)]
struct Cli {
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,

    /// Profile to use instead of the active one (also `KINETIC_PROFILE`).
    #[arg(long, global = true)]
    profile: Option<String>,

    #[command(subcommand)]
    command: Command,
}

/// The commands, in the order a person meets them: run work, follow it,
/// set up the cluster, then configuration and the tools underneath.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run a Python function or a command as a job and print its value.
    #[command(
        after_help = "Example:\n  kinetic run train.py:main --accelerator l4 --kwargs '{\"epochs\": 3}'"
    )]
    Run(commands::run::RunArgs),
    /// Run a function once per line of a JSON Lines file, as one batch.
    #[command(
        after_help = "Example:\n  kinetic map work:square --inputs inputs.jsonl > values.txt"
    )]
    Map(commands::map::MapArgs),
    /// Follow jobs submitted earlier: list, status, logs, result, cancel, cleanup.
    #[command(after_help = "Example:\n  kinetic jobs logs JOB_ID --follow")]
    Jobs(commands::jobs::JobsArgs),
    /// Follow a batch submitted earlier: status, results, wait, cancel, cleanup.
    #[command(after_help = "Example:\n  kinetic batch results GROUP_ID")]
    Batch(commands::batch::BatchArgs),
    /// Check, before a first job, that everything a job needs is there.
    #[command(after_help = "Example:\n  kinetic doctor --project my-project --zone us-central1-a")]
    Doctor(commands::infra::DoctorArgs),
    /// Create what the cluster needs, or finish what an earlier run left:
    /// APIs, buckets, registry, service accounts, GKE cluster, `kinetic` service account.
    #[command(
        after_help = "Example:\n  kinetic up --project my-project --zone us-central1-a --accelerator l4"
    )]
    Up(commands::infra::UpArgs),
    /// The cluster, its node pools, buckets and registry, and what is missing.
    #[command(after_help = "Example:\n  kinetic status")]
    Status(commands::infra::StatusArgs),
    /// Add, list or remove accelerator node pools.
    #[command(after_help = "Example:\n  kinetic pool add --accelerator v5litepod-4")]
    Pool(commands::pool::PoolCommandArgs),
    /// Remove what `kinetic up` created (the buckets only with --delete-buckets).
    #[command(after_help = "Example:\n  kinetic down --yes")]
    Down(commands::infra::DownArgs),
    /// Show the resolved configuration and where each value came from.
    #[command(after_help = "Example:\n  kinetic config")]
    Config(commands::config::ConfigArgs),
    /// Manage profiles in `~/.kinetic/profiles.json`.
    #[command(after_help = "Example:\n  kinetic profile use staging")]
    Profile(commands::profile::ProfileArgs),
    /// Container images of jobs: `resolve` shows a job's image, its cache state and tag inputs.
    #[command(after_help = "Example:\n  kinetic image resolve train.py:main --accelerator l4")]
    Image(commands::image::ImageArgs),
    /// Build and push the prebuilt base images (`{repo}/base-{category}:{tag}`) on Cloud Build.
    #[command(
        after_help = "Example:\n  kinetic build-image --repo us-docker.pkg.dev/my-project/kinetic --category gpu"
    )]
    BuildImage(commands::build_image::BuildImageArgs),
    /// Show the dependency file found for a directory and its filtered requirements.
    #[command(after_help = "Example:\n  kinetic deps .")]
    Deps(commands::deps::DepsArgs),
    /// The accelerator registry, or resolve one accelerator spelling.
    #[command(after_help = "Example:\n  kinetic accelerators resolve a100x4")]
    Accelerators(commands::accelerators::AcceleratorsArgs),
    /// Content hash (64 hex) of a file or directory, as the data cache keys it.
    #[command(after_help = "Example:\n  kinetic hash ./data")]
    Hash(commands::hash::HashArgs),
    /// Write the `context.zip` that would be shipped for a package root.
    #[command(after_help = "Example:\n  kinetic pack . context.zip")]
    Pack(commands::pack::PackArgs),
    /// Print the shell completion script for bash, zsh or fish.
    #[command(
        after_help = "Example:\n  kinetic completions bash > ~/.local/share/bash-completion/completions/kinetic"
    )]
    Completions(commands::completions::CompletionsArgs),
    /// Print the manual page (roff), or write one per command with --out-dir.
    #[command(after_help = "Example:\n  kinetic man | man -l -")]
    Man(commands::man::ManArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let code = u8::try_from(err.exit_code()).unwrap_or(2);
            if code != 0 && asks_for_json() {
                eprintln!("{}", error::json_error("usage", &clap_message(&err), code));
            } else {
                let _ = err.print();
            }
            return ExitCode::from(code);
        }
    };
    let out = Output::new(cli.json);
    render::set_width(std::env::var("COLUMNS").ok().as_deref());
    // Ctrl-C is the commands' from here on: each says what it leaves
    // behind (`interrupt`). Without the listener it ends the process as
    // the signal does.
    let args = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Err(e) = interrupt::listen(args) {
        render::warn(&e.to_string());
    }
    // The one place the process's environment and working directory are read.
    let inv = Invocation::from_process(cli.profile.clone());
    let result = match &cli.command {
        Command::Hash(args) => commands::hash::run(args, &out),
        Command::Pack(args) => commands::pack::run(args, &inv, &out),
        Command::Deps(args) => commands::deps::run(args, &inv, &out),
        Command::Accelerators(args) => commands::accelerators::run(args, &out),
        Command::Config(args) => commands::config::run(args, &inv, &out),
        Command::Profile(args) => commands::profile::run(args, &inv, &out),
        Command::Run(args) => commands::run::run(args, &inv, &out),
        Command::Jobs(args) => commands::jobs::run(args, &inv, &out),
        Command::Image(args) => commands::image::run(args, &inv, &out),
        Command::BuildImage(args) => commands::build_image::run(args, &inv, &out),
        Command::Map(args) => commands::map::run(args, &inv, &out),
        Command::Batch(args) => commands::batch::run(args, &inv, &out),
        Command::Up(args) => commands::infra::up(args, &inv, &out),
        Command::Down(args) => commands::infra::down(args, &inv, &out),
        Command::Status(args) => commands::infra::status(args, &inv, &out),
        Command::Pool(args) => commands::pool::run(args, &inv, &out),
        Command::Doctor(args) => commands::infra::doctor(args, &inv, &out),
        Command::Completions(args) => commands::completions::run(args, Cli::command()),
        Command::Man(args) => commands::man::run(args, Cli::command(), &inv, &out),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let err = with_cluster_state(err, &inv);
            error::print(&err, cli.json);
            ExitCode::from(err.exit_code())
        }
    }
}

/// A failure that could not reach the cluster through the kubeconfig
/// (its message sends the user to `get-credentials`) says what the
/// cluster is instead, when it does not serve: still being created,
/// deleted, never made (`kinetic up` is then the fix, not credentials).
fn with_cluster_state(err: CliError, inv: &Invocation) -> CliError {
    let (CliError::Failed(m) | CliError::Usage(m)) = &err else {
        return err;
    };
    if !m.contains("get-credentials") {
        return err;
    }
    let Ok(settings) = inv.settings_quiet(&inv.args()) else {
        return err;
    };
    let Ok(runtime) = engine::runtime() else {
        return err;
    };
    match runtime.block_on(cloud::cluster_state_note(&settings, inv)) {
        Some(note) => CliError::failed(note),
        None => err,
    }
}

/// True when `--json` is among the arguments (before a `--`): a command
/// line clap refuses still gets its error as JSON.
fn asks_for_json() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// clap's error as one line: its first line without `error: ` and the tip
/// it gives, without the usage block a person reads.
fn clap_message(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let tips: Vec<&str> = lines.filter(|l| l.starts_with("tip:")).collect();
    std::iter::once(first)
        .chain(tips)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words of a shell line: single quotes group, nothing else is special.
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '\'' => quoted = !quoted,
                ' ' if !quoted => {
                    if !word.is_empty() {
                        out.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
        out
    }

    /// Every example `--help` shows is a command line kinetic accepts.
    #[test]
    fn every_example_in_help_parses() {
        let cli = Cli::command();
        let mut helps = vec![cli.get_after_help().map(ToString::to_string)];
        helps.extend(
            cli.get_subcommands()
                .map(|c| c.get_after_help().map(ToString::to_string)),
        );
        let mut seen = 0;
        for help in helps {
            let help = help.expect("every command has an example");
            for line in help.lines().filter(|l| l.starts_with("  kinetic ")) {
                // The top-level list explains each line after two spaces.
                let command = line.trim().split("   ").next().unwrap_or_default();
                let command = command.split(" > ").next().unwrap_or_default();
                let command = command.split(" | ").next().unwrap_or_default();
                let argv = words(command);
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("{command}: {e}");
                }
                seen += 1;
            }
        }
        assert!(seen > 20, "{seen}");
    }
}
