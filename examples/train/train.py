"""A tiny training job, the one the documentation's examples run.

    kinetic run examples/train/train.py:main --arg 3
    kinetic run examples/train/train.py:evaluate --arg data:examples/train/data
"""

import os


def main(epochs=3):
    """Halve a loss once per epoch; print each epoch, return the last loss.

    A job run again (a retry after a failure, a restart after a Spot VM was
    reclaimed) sees its attempt number in KINETIC_ATTEMPT.
    """
    attempt = int(os.environ.get("KINETIC_ATTEMPT", "1"))
    print(f"attempt {attempt} of job {os.environ.get('KINETIC_JOB_ID')}", flush=True)
    loss = 1.0
    for epoch in range(int(epochs)):
        loss /= 2
        print(f"epoch {epoch} loss {loss:.3f}", flush=True)
    return {"epochs": int(epochs), "loss": loss, "attempt": attempt}


def evaluate(shards):
    """The files of a data directory (a downloaded or mounted `Data`), sorted."""
    return sorted(os.listdir(shards))
