//! A temporary home with a Python project, and the real `kinetic` binary
//! run in it with nothing of the test's environment but `PATH` (on the
//! local backend, or pointed at a fake cloud by [`world::World`]), every
//! run bounded in time.

#![allow(dead_code)] // each test binary uses its own share

pub(crate) mod world;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one `kinetic` command may take before the test fails.
pub(crate) const COMMAND_LIMIT: Duration = Duration::from_secs(120);

pub(crate) struct Sandbox {
    dir: Arc<tempfile::TempDir>,
    /// Every command's environment, under what each call adds.
    env: Vec<(String, String)>,
}

impl Sandbox {
    /// A home with `project/work.py` holding `work_py`.
    pub(crate) fn new(work_py: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("home/project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("work.py"), work_py).unwrap();
        Self {
            dir: Arc::new(dir),
            env: Vec::new(),
        }
    }

    /// The same home, its commands run with `env` under what each call
    /// adds (the environment that points them at a fake cloud, say).
    pub(crate) fn with_env(&self, env: Vec<(String, String)>) -> Self {
        Self {
            dir: self.dir.clone(),
            env,
        }
    }

    /// The same home with its environment but the variables `names`.
    pub(crate) fn without(&self, names: &[&str]) -> Self {
        let env = self
            .env
            .iter()
            .filter(|(k, _)| !names.contains(&k.as_str()))
            .cloned()
            .collect();
        self.with_env(env)
    }

    /// The same home with its environment and `name` set to `value`.
    pub(crate) fn with_var(&self, name: &str, value: &str) -> Self {
        let mut env = self.without(&[name]).env;
        env.push((name.to_owned(), value.to_owned()));
        self.with_env(env)
    }

    /// The environment every command of this sandbox has.
    pub(crate) fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Write `text` to `rel` inside the sandbox, making its folders.
    pub(crate) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("/"))).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A path inside the sandbox.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `kinetic ARGS` from the project, with `env` on top of the sandbox's.
    pub(crate) fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
        cmd.args(args)
            .current_dir(self.path("home/project"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path("home"))
            .env("KINETIC_LOCAL_ROOT", self.path("local"))
            .env("KINETIC_PROFILES_FILE", self.path("profiles.json"))
            .stdin(Stdio::null())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    pub(crate) fn kinetic(&self, args: &[&str]) -> Output {
        self.kinetic_env(args, &[])
    }

    pub(crate) fn kinetic_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        output_within(self.command(args, env), COMMAND_LIMIT)
    }

    /// `kinetic ARGS` with `env`, off the runtime's threads (a fake cluster
    /// in the same test runs on them), bounded in time.
    pub(crate) async fn kinetic_async(&self, args: &[&str], env: &[(String, String)]) -> Output {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.kinetic_async_env(args, &env).await
    }

    /// [`Sandbox::kinetic_async`] with `env` as string slices.
    pub(crate) async fn kinetic_async_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let cmd = self.command(args, env);
        tokio::task::spawn_blocking(move || output_within(cmd, COMMAND_LIMIT))
            .await
            .unwrap()
    }
}

/// The output of `cmd`, failing the test (and killing the process) if it
/// has not ended after `limit`: a command that hangs is a failure, not a
/// stuck test run.
pub(crate) fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_within(child, limit)
}

/// `child`'s output, failing the test if it has not ended after `limit`.
pub(crate) fn wait_within(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "kinetic did not end within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
