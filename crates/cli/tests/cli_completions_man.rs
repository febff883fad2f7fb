//! What people expect of a Rust command line, through the real binary:
//! shell completions (bash, zsh, fish) and a manual page generated from
//! the clap definitions, each loaded by the program that reads it.

mod sandbox;

use std::process::{Command, Stdio};

use sandbox::{Sandbox, stderr, stdout};

const WORK_PY: &str = "def square(x):\n    return x * x\n";

/// `kinetic ARGS`, its output read as it comes (a completion script is
/// larger than a pipe holds).
fn large(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.command(args, &[]).output().unwrap()
}

#[test]
fn bash_loads_the_completions_and_completes_commands_and_flags() {
    let sb = Sandbox::new(WORK_PY);
    let o = large(&sb, &["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = sb.write("kinetic.bash", &stdout(&o));
    // What bash offers after `kinetic ba` and `kinetic run --dr`.
    let complete = |words: &str| {
        let line = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; _kinetic kinetic \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let o = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &line])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let offered = complete("kinetic ba");
    assert_eq!(offered.lines().collect::<Vec<_>>(), ["batch"], "{offered}");
    let offered = complete("kinetic run --det");
    assert_eq!(
        offered.lines().collect::<Vec<_>>(),
        ["--detach"],
        "{offered}"
    );
    let offered = complete("kinetic completions ''");
    assert_eq!(
        offered
            .lines()
            .filter(|w| !w.starts_with('-'))
            .collect::<Vec<_>>(),
        ["bash", "zsh", "fish"],
        "{offered}"
    );
}

#[test]
fn zsh_and_fish_scripts_and_the_man_page_come_from_the_same_definitions() {
    let sb = Sandbox::new(WORK_PY);
    let o = large(&sb, &["completions", "zsh"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let zsh = stdout(&o);
    assert!(zsh.starts_with("#compdef kinetic"), "{zsh}");
    assert!(
        zsh.contains("'--dry-run[") && zsh.contains("'batch:"),
        "{zsh}"
    );
    let o = large(&sb, &["completions", "fish"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fish = stdout(&o);
    assert!(
        fish.contains("complete -c kinetic") && fish.contains("-l dry-run"),
        "{fish}"
    );
    let o = sb.kinetic(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // The page, rendered as `man` renders it.
    let o = large(&sb, &["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = sb.write("kinetic.1", &stdout(&o));
    let o = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "NAME",
        "kinetic",
        "SYNOPSIS",
        "SUBCOMMANDS",
        "completions",
        "batch",
    ] {
        assert!(text.contains(want), "{want} missing from: {text}");
    }
    // One page per command, when asked.
    std::fs::create_dir_all(sb.path("man")).unwrap();
    let dir = sb.path("man").display().to_string();
    let o = sb.kinetic(&["man", "--out-dir", &dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    for page in ["kinetic.1", "kinetic-run.1", "kinetic-batch-wait.1"] {
        assert!(sb.path("man").join(page).is_file(), "{page}");
    }
}
