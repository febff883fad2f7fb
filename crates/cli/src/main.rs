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
use crate::render::Output;

/// Run Python functions and commands on remote TPUs, GPUs and CPUs.
#[derive(Debug, Parser)]
#[command(name = "kinetic", version, about, propagate_version = true)]
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

#[derive(Debug, Subcommand)]
enum Command {
    /// Content hash (64 hex) of a file or directory, as the data cache keys it.
    Hash(commands::hash::HashArgs),
    /// Write the `context.zip` that would be shipped for a package root.
    Pack(commands::pack::PackArgs),
    /// Show the dependency file found for a directory and its filtered requirements.
    Deps(commands::deps::DepsArgs),
    /// The accelerator registry, or resolve one accelerator spelling.
    Accelerators(commands::accelerators::AcceleratorsArgs),
    /// Show the resolved configuration and where each value came from.
    Config(commands::config::ConfigArgs),
    /// Manage profiles in `~/.kinetic/profiles.json`.
    Profile(commands::profile::ProfileArgs),
    /// Run a Python function or a command as a job and print its value.
    Run(commands::run::RunArgs),
    /// Follow jobs submitted earlier: list, status, logs, result, cancel, cleanup.
    Jobs(commands::jobs::JobsArgs),
    /// Container images of jobs: `resolve` shows a job's image, its cache state and tag inputs.
    Image(commands::image::ImageArgs),
    /// Build and push the prebuilt base images (`{repo}/base-{category}:{tag}`) on Cloud Build.
    BuildImage(commands::build_image::BuildImageArgs),
    /// Run a function once per line of a JSON Lines file, as one batch.
    Map(commands::map::MapArgs),
    /// Follow a batch submitted earlier: status, results, wait, cancel, cleanup.
    Batch(commands::batch::BatchArgs),
    /// Create what the cluster needs, or finish what an earlier run left:
    /// APIs, buckets, registry, service accounts, GKE cluster, `kinetic` service account.
    Up(commands::infra::UpArgs),
    /// Remove what `kinetic up` created (the buckets only with --delete-buckets).
    Down(commands::infra::DownArgs),
    /// The cluster, its node pools, buckets and registry, and what is missing.
    Status(commands::infra::StatusArgs),
    /// Add, list or remove accelerator node pools.
    Pool(commands::pool::PoolCommandArgs),
    /// Check, before a first job, that everything a job needs is there.
    Doctor(commands::infra::DoctorArgs),
    /// Print the shell completion script for bash, zsh or fish.
    Completions(commands::completions::CompletionsArgs),
    /// Print the manual page (roff), or write one per command with --out-dir.
    Man(commands::man::ManArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = err.print();
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    let out = Output::new(cli.json);
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
            error::print(&err);
            ExitCode::from(err.exit_code())
        }
    }
}
