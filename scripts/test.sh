#!/usr/bin/env bash
# The full test suite, from a fresh checkout: installs what the tests need,
# then runs formatting, the core purity check, clippy, docs, the Rust tests
# and the runner's Python tests. CI runs exactly this (`.ci/run`).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# A full run builds every test binary once: cargo's incremental caches
# would double the disk it takes (tens of GiB) for rebuilds it never
# makes. Set CARGO_INCREMENTAL=1 to keep them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step "tools"
df -h . | tail -n 1 | awk '{print "disk: " $4 " free of " $2}'
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
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin pytest pytest-timeout pytest-rerunfailures cloudpickle datasets
# The type checks of the module's stubs (stubtest, mypy), pinned: a newer
# mypy may judge the same stubs differently.
"$venv/bin/python" -m pip install -q --disable-pip-version-check mypy==2.4.1
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
# The debug profile (the workspace's, built above): pyproject.toml names the
# wheel profile, which maturin develop would otherwise use too.
(cd crates/python && VIRTUAL_ENV="$PWD/../../$venv" "../../$venv/bin/maturin" develop --profile dev --locked -q)

step "python module types (stubtest, mypy over the README's and the typed examples)"
# kinetic/__init__.pyi against the module as built: a public name,
# parameter or default without its stub fails; then mypy over
# crates/python/typing/examples.py (--strict), the README's python blocks
# and the test project.
"$venv/bin/python" scripts/check-python-types.py

step "python module tests (pytest)"
# A test that hangs fails after 5 minutes (pytest-timeout raises in it, and
# the rest go on), and the whole step stops after 40: a hang is a failure
# that names its test, never a CI run that ends at its limit with no word.
# As nextest's (.config/nextest.toml), a test that fails once gets one more
# try and is reported as rerun (R, and in the summary): a bug to fix, never
# a pass to rely on. Unbuffered, so a stopped run still shows how far it
# got; the slowest tests are listed at the end.
PYTHONUNBUFFERED=1 timeout --kill-after=30 2400 \
  "$venv/bin/python" -m pytest -q --timeout=300 --reruns=1 --durations=10 -rR crates/python/tests

step "python wheel (maturin build, wheel profile; installed into a fresh venv)"
# The wheel the README installs: built with the wheel profile (no debug
# info, stripped; pyproject.toml names it) into target/wheels, installed
# with pip into a venv of its own (cloudpickle from the wheelhouse), and a
# job run with it. A separate build from the suite's (which uses the debug
# build the rest of the workspace shares): see README, "Installing the
# Python module", for what it costs.
rm -f target/wheels/kinetic_rs-*.whl
(cd crates/python && "../../$venv/bin/maturin" build --locked -q -o ../../target/wheels)
wheel=$(ls "$PWD"/target/wheels/kinetic_rs-*.whl)
wheel_venv=target/wheel-venv
rm -rf "$wheel_venv" && python3 -m venv "$wheel_venv"
"$wheel_venv/bin/python" -m pip install -q --disable-pip-version-check --no-index \
  --find-links target/wheelhouse "$wheel"
wheel_home=$(mktemp -d)
(cd examples/hello && env -u KINETIC_BACKEND -u KINETIC_STORE_URL HOME="$wheel_home" \
  KINETIC_LOCAL_ROOT="$wheel_home/local" "../../$wheel_venv/bin/python" - "$wheel" <<'PY'
import importlib.metadata
import os
import sys
import zipfile

import kinetic
import work

assert kinetic.__version__ == importlib.metadata.version("kinetic-rs"), kinetic.__version__
assert os.path.dirname(kinetic.__file__).startswith(sys.prefix), kinetic.__file__
with zipfile.ZipFile(sys.argv[1]) as wheel:
    native = [i for i in wheel.infolist() if "/_native." in i.filename]
size = native[0].file_size
# 18.2 MiB with the wheel profile; the release profile's debug line tables
# made a 131 MB extension.
assert size < 40 * 2**20, "kinetic/_native is %.1f MiB: is the wheel profile still stripped?" % (size / 2**20)
value = kinetic.run(accelerator="cpu", backend="local")(work.square)(7)
assert value == 49, value
print("kinetic-rs %s: %s, extension %.1f MiB, square(7) = %d" % (
    kinetic.__version__, os.path.basename(sys.argv[1]), size / 2**20, value))
PY
)
rm -rf "$wheel_home"

step "rust tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
  cargo test --workspace --locked --doc --quiet
else
  cargo test --workspace --locked --no-fail-fast
fi

step "disk"
du -sh target | awk '{print "target/: " $1}'
df -h . | tail -n 1 | awk '{print "disk: " $4 " free of " $2}'
