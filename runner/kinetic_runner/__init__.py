"""Kinetic runner, protocol v1 (see docs/runner-protocol.md).

Runs one job inside a pod (or as a local child process): downloads and
verifies the job's artifacts, installs requirements, extracts the context,
applies the packaging plan, sets the environment, resolves data references,
calls the user's function (or runs the user's command) and writes a JSON
result. Python 3.9+, standard library only.

    python3 -u kinetic_runner.py --spec URI [--workdir DIR] [--mount-root DIR]

Runner log lines go to stderr as ``[kinetic] {phase}: ...``; the user's
stdout and stderr pass through untouched. Environment values are never
printed.
"""

# The package is authored one module per concern and shipped as one file,
# `kinetic_runner.py`: the modules below, in this order, each with its
# `from .module import ...` lines taken out (crates/runner/build.rs, and
# runner/assemble.py for the tests). So a module imports only modules listed
# above it, names what it imports (`from .protocol import log`, never
# `protocol.log`), and defines no top-level name another module defines.
from .protocol import *  # noqa: F401,F403
from .gcs import *  # noqa: F401,F403
from .redaction import *  # noqa: F401,F403
from .attempts import *  # noqa: F401,F403
from .logs import *  # noqa: F401,F403
from .environment import *  # noqa: F401,F403
from .debug import *  # noqa: F401,F403
from .context import *  # noqa: F401,F403
from .plan import *  # noqa: F401,F403
from .artifacts import *  # noqa: F401,F403
from .job_module import *  # noqa: F401,F403
from .hf import *  # noqa: F401,F403
from .data import *  # noqa: F401,F403
from .values import *  # noqa: F401,F403
from .spec import *  # noqa: F401,F403
from .indexed import *  # noqa: F401,F403
from .results import *  # noqa: F401,F403
from .python_values import *  # noqa: F401,F403
from .processes import *  # noqa: F401,F403
from .phases import *  # noqa: F401,F403
from .main import *  # noqa: F401,F403
from .worker import *  # noqa: F401,F403
from .blocks import *  # noqa: F401,F403
