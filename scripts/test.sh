#!/usr/bin/env bash
# The full test suite, from a fresh checkout: installs what the tests need,
# then runs formatting, the core purity check, clippy, docs, the Rust tests
# and the runner's Python tests. CI runs exactly this (`.ci/run`).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "tools"
if ! command -v python3 >/dev/null 2>&1; then
  # The runner and the local backend need a host Python 3.9+.
  apt-get update -qq && apt-get install -y -qq python3 >/dev/null
fi
python3 - <<'PY'
import sys
assert sys.version_info >= (3, 9), f"python3 >= 3.9 needed, found {sys.version}"
print("python3", sys.version.split()[0])
PY
# The CLI's terminal tests type ^C into a terminal script(1) makes, and
# its manual page is rendered with man(1).
if ! command -v script >/dev/null 2>&1 || ! command -v man >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq bsdutils man-db >/dev/null
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo --version

step "cargo fmt --check"
cargo fmt --all --check

step "kinetic-core purity"
scripts/check-core-purity.sh

step "no module circles (core, engine, cli, fake-gcp)"
python3 scripts/check-module-cycles.py crates/core/src crates/engine/src crates/cli/src crates/fake-gcp/src

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "runner tests (python3 unittest)"
if [[ -d runner/tests ]]; then
  python3 -m unittest discover -s runner/tests -t . 2>&1 | tail -n 5
fi

step "python module (maturin develop into a venv, pytest)"
# The kinetic Python module, built into a venv under target/ (kept between
# runs) with maturin from PyPI, then its pytest suite: the reference's
# examples as a user writes them, on the local backend and with
# backend="gke" on kinetic-fake-gcp.
venv=target/python-venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin pytest cloudpickle datasets
# A notebook runner: the suite runs a function defined in a notebook cell.
"$venv/bin/python" -m pip install -q --disable-pip-version-check nbclient nbformat ipykernel
# debugpy: the runner's debug jobs (runner test below, the CLI's end-to-end
# debug sessions, which find this venv's interpreter).
"$venv/bin/python" -m pip install -q --disable-pip-version-check debugpy
# The runner's hf:// loading, for real, with the venv's datasets package
# (the system python3 has none): a dataset the test builds, no hub reached.
KINETIC_RUNNER_PYTHON="$PWD/$venv/bin/python" python3 -m unittest runner.tests.hf_loading 2>&1 | tail -n 5
# The runner's debug jobs with the venv's debugpy.
KINETIC_RUNNER_PYTHON="$PWD/$venv/bin/python" python3 -m unittest runner.tests.debugpy_session 2>&1 | tail -n 5
# The fake cloud's package index: its images are venvs whose packages pip
# installs from this wheelhouse only (cloudpickle in every image, debugpy
# for the debug jobs); the only download, here, never in a test.
"$venv/bin/python" -m pip download -q --disable-pip-version-check -d target/wheelhouse cloudpickle debugpy
# The gke half of the suite runs on the fake cloud of kinetic-fake-gcp (and
# the documentation's cluster commands, crates/cli/tests/docs_commands.rs,
# find the binary beside kinetic in target/debug).
cargo build -p kinetic-fake-gcp-server --locked --quiet
(cd crates/python && VIRTUAL_ENV="$PWD/../../$venv" "../../$venv/bin/maturin" develop --locked -q)
"$venv/bin/python" -m pytest -q crates/python/tests

step "rust tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
  cargo test --workspace --locked --doc --quiet
else
  cargo test --workspace --locked --no-fail-fast
fi
