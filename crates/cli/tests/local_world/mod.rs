//! A temporary home with a Python project (`proj/work.py`, a
//! `pyproject.toml`), and the real `kinetic` binary run in it on the local
//! backend with the host's python3 and a directory store (`store/`).

#![allow(dead_code)] // each test binary uses its own share

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub(crate) struct World {
    _tmp: tempfile::TempDir,
    pub(crate) home: PathBuf,
}

impl World {
    /// A home whose `proj/work.py` holds `work_py`.
    pub(crate) fn new(work_py: &str) -> Self {
        Self::with_work(|_| work_py.to_owned())
    }

    /// A home whose `proj/work.py` holds what `work_py` makes of the
    /// home's path.
    pub(crate) fn with_work(work_py: impl FnOnce(&Path) -> String) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().canonicalize().expect("canonical");
        let proj = home.join("proj");
        fs::create_dir_all(&proj).expect("mkdir");
        fs::write(proj.join("pyproject.toml"), "[project]\nname = \"proj\"\n").expect("write");
        fs::write(proj.join("work.py"), work_py(&home)).expect("write");
        Self { _tmp: tmp, home }
    }

    /// Write `lines` as the JSON lines file `proj/{name}`; its path.
    pub(crate) fn inputs(&self, name: &str, lines: &[Value]) -> String {
        let text: String = lines.iter().map(|v| format!("{v}\n")).collect();
        let path = self.home.join("proj").join(name);
        fs::write(&path, text).expect("write");
        path.to_string_lossy().into_owned()
    }

    /// `kinetic ARGS…` in the project, with the home, the local root and
    /// the store set and no profile or backend of the test's environment.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetic"));
        cmd.args(args)
            .env("HOME", &self.home)
            .env("KINETIC_LOCAL_ROOT", self.home.join("local"))
            .env(
                "KINETIC_STORE_URL",
                format!("file://{}", self.home.join("store").display()),
            )
            .env("KINETIC_LOCAL_MAX_CONCURRENT", "4")
            .env_remove("KINETIC_PROFILE")
            .env_remove("KINETIC_BACKEND")
            .current_dir(self.home.join("proj"));
        cmd
    }

    /// [`World::command`] run to its end.
    pub(crate) fn kinetic(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run kinetic")
    }
}
