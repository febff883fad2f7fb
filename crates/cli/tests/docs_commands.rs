//! Every shell command of `README.md` and `docs/*.md`, run as a reader
//! would run it: with the real `kinetic` binary (and `kinetic-fake-gcp`
//! beside it) first on `PATH`, from the repository root, in a fresh home.
//!
//! The convention the pages follow, in their source:
//! - A fenced block in `sh`, `bash`, `shell` or `console` (or a `text`
//!   block with a `$ ` line) is a shell block. In `sh`/`bash`/`shell` every
//!   line is shell; in `console` the lines starting with `$ ` are commands
//!   (a line ending in `\` goes on with the next), the others are their
//!   output, and each output line without `…` must appear, trimmed, as a
//!   line of what the commands printed.
//! - The comment just before a shell block says how it runs:
//!   `<!-- run -->` on this machine (the local backend; a block may start
//!   `kinetic-fake-gcp` itself), `<!-- run: cluster -->` after the
//!   README's offline set-up (a new project of `kinetic-fake-gcp`, its
//!   `env` sourced, set up by `kinetic up --yes`), or `<!-- not run: WHY -->`. A shell block with
//!   neither fails the test, as does a command that fails, an output line
//!   that was not printed, a file a block names that does not exist (in
//!   blocks not run too) or a link to a page that does not exist.
//! - Python blocks follow the same markers and are run by
//!   `crates/python/tests/test_docs.py`.
//!
//! One test per page, so the pages run side by side; each prints how many
//! blocks it ran and which it did not run, and why.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// How long one block may take (the cluster blocks build images and
/// create node pools on the fake cloud).
const BLOCK_LIMIT: Duration = Duration::from_secs(240);

/// What the `cluster` marker runs before the block: the README's offline
/// cluster, a new project of `kinetic-fake-gcp` that `kinetic up` sets up
/// (its output kept out of the block's).
const CLUSTER_PRELUDE: &str = r#"fake=$(mktemp -d)
kinetic-fake-gcp --state-dir "$fake" --empty > "$fake/log" 2>&1 &
until [ -e "$fake/env" ]; do kill -0 $! || { cat "$fake/log"; exit 1; }; sleep 0.2; done
source "$fake/env"
kinetic up --yes > "$fake/up.log" 2>&1 || { cat "$fake/up.log"; exit 1; }
"#;

/// How a marked block runs.
#[derive(Debug, Clone, PartialEq)]
enum Marker {
    /// On this machine, from the repository root.
    Run,
    /// After the offline cluster set-up.
    Cluster,
    /// Not run, for this reason.
    NotRun(String),
}

/// One fenced shell block of a page.
#[derive(Debug)]
struct Block {
    /// `page:line` of the opening fence.
    place: String,
    /// `console`, `sh`, …
    lang: String,
    body: String,
    marker: Option<Marker>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The pages whose commands are run: the README and every `docs/*.md`.
fn pages() -> Vec<String> {
    let root = repo_root();
    let mut pages = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The marker an HTML comment holds, if it is one of ours.
fn parse_marker(html: &str) -> Option<Result<Marker, String>> {
    let inner = html
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    if let Some(reason) = inner.strip_prefix("not run:") {
        let reason = reason.trim();
        return Some(if reason.is_empty() {
            Err("`<!-- not run: -->` without a reason".to_owned())
        } else {
            Ok(Marker::NotRun(reason.to_owned()))
        });
    }
    match inner {
        "run" => Some(Ok(Marker::Run)),
        "run: cluster" => Some(Ok(Marker::Cluster)),
        other if other.starts_with("run") => Some(Err(format!(
            "unknown marker `<!-- {other} -->`: expected `<!-- run -->`, `<!-- run: cluster -->` \
             or `<!-- not run: WHY -->`"
        ))),
        _ => None,
    }
}

fn is_shell(lang: &str, body: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console")
        || (lang == "text" && body.lines().any(|l| l.starts_with("$ ")))
}

/// The shell blocks of `text` (the page `page`) with their markers, and
/// the problems met reading them.
fn shell_blocks(page: &str, text: &str) -> (Vec<Block>, Vec<String>) {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut blocks = Vec::new();
    let mut problems = Vec::new();
    // The marker of the last HTML block, cleared by anything else between
    // it and a fence.
    let mut pending: Option<Marker> = None;
    let mut open: Option<(String, usize, String)> = None;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Html(html) if open.is_none() => match parse_marker(&html) {
                Some(Ok(marker)) => pending = Some(marker),
                Some(Err(e)) => {
                    problems.push(format!("{page}:{}: {e}", line_of(range.start)));
                    pending = None;
                }
                None => pending = None,
            },
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let lang = info.split_whitespace().next().unwrap_or("").to_owned();
                open = Some((lang, range.start, String::new()));
            }
            Event::Text(t) if open.is_some() => {
                if let Some((_, _, body)) = open.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((lang, start, body)) = open.take() {
                    let marker = pending.take();
                    if is_shell(&lang, &body) {
                        blocks.push(Block {
                            place: format!("{page}:{}", line_of(start)),
                            lang,
                            body,
                            marker,
                        });
                    }
                }
            }
            Event::Start(Tag::Paragraph | Tag::Heading { .. } | Tag::List(_) | Tag::Table(_)) => {
                pending = None
            }
            _ => {}
        }
    }
    (blocks, problems)
}

/// The script a block runs, and the output lines it promises.
fn script_of(block: &Block) -> (String, Vec<String>) {
    if block.lang != "console" && block.lang != "text" {
        return (block.body.clone(), Vec::new());
    }
    let mut script = String::new();
    let mut expected = Vec::new();
    let mut continued = false;
    for line in block.body.lines() {
        if continued {
            script.push_str(line);
            script.push('\n');
            continued = line.trim_end().ends_with('\\');
        } else if let Some(command) = line.strip_prefix("$ ") {
            script.push_str(command);
            script.push('\n');
            continued = command.trim_end().ends_with('\\');
        } else if !line.trim().is_empty() && !line.contains('…') {
            expected.push(line.trim().to_owned());
        }
    }
    (script, expected)
}

/// The files a block's commands name (`examples/…`, `*.py`, `*.jsonl`),
/// for the check that they exist; shell variables and URLs are not paths.
fn named_files(script: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in script.lines() {
        let code = match line.find(" #") {
            Some(i) => &line[..i],
            None => line,
        };
        for word in code.split_whitespace() {
            let word = word.trim_matches(|c| c == '"' || c == '\'' || c == '\\');
            // `--arg data:PATH`, `--volume /m=data+fuse:PATH`, `FILE.py:function`.
            let word = word.rsplit_once('=').map_or(word, |(_, v)| v);
            let word = word
                .strip_prefix("data:")
                .or_else(|| word.strip_prefix("data+fuse:"))
                .unwrap_or(word);
            if word.contains('$') || word.contains("://") || word.contains('*') {
                continue;
            }
            let path = match word.split_once(".py:") {
                Some((file, _)) => format!("{file}.py"),
                None => word.to_owned(),
            };
            if path.starts_with("examples/")
                || path.starts_with("crates/")
                || path.starts_with("scripts/")
                || path.ends_with(".py")
                || path.ends_with(".jsonl")
            {
                files.push(path);
            }
        }
    }
    files
}

/// The relative links of a page (`[text](path#anchor)`) whose target is
/// missing.
fn broken_links(page: &str, text: &str) -> Vec<String> {
    let root = repo_root();
    let dir = root.join(page).parent().unwrap().to_path_buf();
    let mut broken = Vec::new();
    for event in Parser::new(text) {
        if let Event::Start(Tag::Link { dest_url, .. }) = event {
            let url = dest_url.to_string();
            if url.contains("://") || url.starts_with('#') || url.starts_with("mailto:") {
                continue;
            }
            let path = url.split('#').next().unwrap_or("");
            if !dir.join(path).exists() {
                broken.push(format!("{page}: link to {url}: no such file"));
            }
        }
    }
    broken
}

/// Run `script` under bash from the repository root, in the home `home`,
/// with the built binaries first on `PATH`; its combined output, or why
/// it failed. Its output goes to a file, not a pipe, so a process it left
/// running holds nothing the test waits on; the block's whole process
/// group is stopped once bash has ended.
fn run_script(script: &str, home: &Path) -> Result<String, String> {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_kinetic")).parent().unwrap();
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let log_path = home.join("output.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!("set -euo pipefail\n{script}"))
        .current_dir(repo_root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("TMPDIR", &tmp)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        // Its own process group, so a server it left running goes with it.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start bash: {e}"))?;
    let group = Pid::from_raw(child.id() as i32);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > BLOCK_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    stop_group(group, status.is_none());
    let _ = child.wait();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    match status {
        None => Err(format!("it did not end within {BLOCK_LIMIT:?}:\n{text}")),
        Some(status) if status.success() => Ok(text),
        Some(status) => Err(format!("it failed ({status}):\n{text}")),
    }
}

/// Stop what is left of a block's process group (a fake cloud it
/// started): SIGTERM, then SIGKILL after 10 s (at once when `now`).
fn stop_group(group: Pid, now: bool) {
    let _ = killpg(
        group,
        if now {
            Signal::SIGKILL
        } else {
            Signal::SIGTERM
        },
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while killpg(group, None).is_ok() {
        if Instant::now() > deadline {
            let _ = killpg(group, Signal::SIGKILL);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Run every shell block of `page`; fail naming each block that has no
/// marker, fails, does not print what it promises, or names a missing
/// file.
fn run_page(page: &str) {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join(page)).unwrap();
    let (blocks, mut problems) = shell_blocks(page, &text);
    problems.extend(broken_links(page, &text));
    let (mut ran, mut not_run) = (0, Vec::new());
    for block in &blocks {
        let (script, expected) = script_of(block);
        for file in named_files(&script) {
            if !root.join(&file).exists() {
                problems.push(format!(
                    "{}: names {file}, which does not exist",
                    block.place
                ));
            }
        }
        let prelude = match &block.marker {
            None => {
                problems.push(format!(
                    "{}: a ```{} block with neither `<!-- run -->` nor `<!-- not run: WHY -->` before it",
                    block.place, block.lang
                ));
                continue;
            }
            Some(Marker::NotRun(why)) => {
                not_run.push(format!("{}: {why}", block.place));
                continue;
            }
            Some(Marker::Run) => "",
            Some(Marker::Cluster) => CLUSTER_PRELUDE,
        };
        let fake = Path::new(env!("CARGO_BIN_EXE_kinetic")).with_file_name("kinetic-fake-gcp");
        if (block.marker == Some(Marker::Cluster) || script.contains("kinetic-fake-gcp"))
            && !fake.exists()
        {
            problems.push(format!(
                "{}: needs {}: build it first (cargo build -p kinetic-fake-gcp-server; scripts/test.sh does)",
                block.place,
                fake.display()
            ));
            continue;
        }
        let home = tempfile::tempdir().unwrap();
        eprintln!("{}: running\n{script}", block.place);
        match run_script(&format!("{prelude}{script}"), home.path()) {
            Err(why) => problems.push(format!("{}: {why}", block.place)),
            Ok(output) => {
                let printed: Vec<&str> = output.lines().map(str::trim).collect();
                for line in &expected {
                    if !printed.contains(&line.as_str()) {
                        problems.push(format!(
                            "{}: promises the line `{line}`, which was not printed; it printed:\n{output}",
                            block.place
                        ));
                    }
                }
            }
        }
        ran += 1;
    }
    println!(
        "{page}: {} shell blocks, {ran} run, {} not run",
        blocks.len(),
        not_run.len()
    );
    for line in &not_run {
        println!("  not run: {line}");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// One test per page; [`every_page_has_its_test`] keeps the list whole.
macro_rules! page_tests {
    ($($name:ident => $page:literal,)*) => {
        $(
            #[test]
            fn $name() {
                run_page($page);
            }
        )*
        const TESTED_PAGES: &[&str] = &[$($page),*];
    };
}

page_tests! {
    readme => "README.md",
    docs_architecture => "docs/architecture.md",
    docs_batches => "docs/batches.md",
    docs_cli => "docs/cli.md",
    docs_cluster => "docs/cluster.md",
    docs_configuration => "docs/configuration.md",
    docs_data => "docs/data.md",
    docs_debugging => "docs/debugging.md",
    docs_jobs => "docs/jobs.md",
    docs_library => "docs/library.md",
    docs_local_gpus => "docs/local-gpus.md",
    docs_performance => "docs/performance.md",
    docs_python => "docs/python.md",
    docs_runner_protocol => "docs/runner-protocol.md",
    docs_troubleshooting => "docs/troubleshooting.md",
}

#[test]
fn every_page_has_its_test() {
    let mut tested: Vec<String> = TESTED_PAGES.iter().map(|p| p.to_string()).collect();
    tested.sort();
    let mut found = pages();
    found.sort();
    assert_eq!(found, tested, "add each page of docs/ to page_tests!");
}

#[test]
fn an_unmarked_block_a_failing_command_and_a_missing_file_are_caught() {
    let page = "<!-- run -->\n```console\n$ true\nnot printed\n```\n\n```sh\nkinetic run examples/nowhere/work.py:f\n```\n\n<!-- not run: here -->\n```sh\nkinetic run examples/hello/work.py:nothing\n```\n\n<!-- run: clusters -->\n```sh\ntrue\n```\n";
    let (blocks, problems) = shell_blocks("t.md", page);
    assert_eq!(blocks.len(), 4, "{blocks:?}");
    assert_eq!(blocks[0].marker, Some(Marker::Run));
    assert_eq!(
        blocks[1].marker, None,
        "a marker is for the next block only"
    );
    assert_eq!(blocks[2].marker, Some(Marker::NotRun("here".into())));
    assert_eq!(blocks[3].marker, None, "an unknown marker marks nothing");
    assert!(problems[0].contains("unknown marker"), "{problems:?}");
    let (script, expected) = script_of(&blocks[0]);
    assert_eq!(
        (script.as_str(), expected),
        ("true\n", vec!["not printed".to_owned()])
    );
    assert_eq!(named_files(&blocks[1].body), ["examples/nowhere/work.py"]);
    let home = tempfile::tempdir().unwrap();
    assert!(run_script("false", home.path()).is_err());
    assert_eq!(run_script("echo hi", home.path()).unwrap(), "hi\n");
}
