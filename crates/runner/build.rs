//! Builds the runner the engine ships (`RUNNER_SOURCE`) from the package
//! `runner/kinetic_runner/` and the job-side module `runner/kinetic_job.py`
//! (the rules: `src/assemble.rs`), into `$OUT_DIR/kinetic_runner.py`.

// The library's module, compiled into the build script too: its `pub`
// items are the library's interface, not the script's.
#[allow(unreachable_pub)]
#[path = "src/assemble.rs"]
mod assemble;

use std::path::{Path, PathBuf};

const RUNNER_DIR: &str = "../../runner";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

fn main() {
    let root = Path::new(RUNNER_DIR);
    let package = root.join(assemble::PACKAGE);
    // The directory too, so a module added or removed rebuilds.
    println!("cargo:rerun-if-changed={}", package.display());
    let job_module = root.join(assemble::JOB_MODULE_FILE);
    println!("cargo:rerun-if-changed={}", job_module.display());
    let entries = std::fs::read_dir(&package)
        .unwrap_or_else(|err| panic!("cannot list {}: {err}", package.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "py") {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let init = read(&package.join("__init__.py"));
    let built = assemble::assemble(
        &init,
        |name| std::fs::read_to_string(package.join(format!("{name}.py"))).ok(),
        &read(&job_module),
    )
    .unwrap_or_else(|err| panic!("cannot build the runner: {err}"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join(assemble::RUNNER_FILE_NAME), built).expect("write the built runner");
}
