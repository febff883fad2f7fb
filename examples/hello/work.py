"""Functions that `kinetic run` calls as jobs.

    kinetic run examples/hello/work.py:square --arg 7
    kinetic run examples/hello/work.py:word_counts --arg data:examples/hello/data
"""

import os


def square(x):
    """Return x squared (and say where it ran)."""
    print(f"squaring {x} in job {os.environ.get('KINETIC_JOB_ID')}", flush=True)
    return x * x


def word_counts(data_dir):
    """Count the words of every text file under a Data directory."""
    counts = {}
    for root, _dirs, files in os.walk(data_dir):
        for name in sorted(files):
            with open(os.path.join(root, name), encoding="utf-8") as fh:
                counts[os.path.relpath(os.path.join(root, name), data_dir)] = len(fh.read().split())
    return counts
