"""What the stubs promise a typed caller: checked by ``mypy --strict``
(scripts/check-python-types.py), never run. A decorated function keeps its
parameters and its return type; handles carry the function's value type.
Each ``# type: ignore[code]`` below marks a call the stubs must reject: with
``warn_unused_ignores`` an ignore that no longer silences an error (a stub
that lets the call through, say by typing it ``Any``) fails the check."""

from typing import Any

from typing_extensions import assert_type

import kinetic
from kinetic import BatchHandle, JobHandle


@kinetic.run(accelerator="cpu", backend="local")
def square(x: int) -> int:
    return x * x


@kinetic.run(accelerator="l4", spot=True, restarts=5, retries=1)
def greet(name: str, *, punctuation: str = "!") -> str:
    return name + punctuation


def typed_calls() -> None:
    assert_type(square(7), int)
    assert_type(greet("Ada", punctuation="?"), str)
    job = square.run_async(7)
    assert_type(job, JobHandle[int])
    assert_type(job.result(timeout=60, cleanup=False), int)
    assert_type(job.status(), kinetic.JobStatus)
    assert_type(job.status().is_terminal, bool)
    assert_type(job.logs(), str)
    assert_type(job.logs(follow=True), None)
    assert_type(job.tail(10), str)
    assert_type(job.attempts(), list[dict[str, Any]])
    batch = square.run_async_map(range(10), max_concurrent=2, retries=1, name="squares")
    assert_type(batch, BatchHandle[int])
    assert_type(batch.results(), list[int])
    assert_type(batch.results(return_exceptions=True), list[int | BaseException])
    for done in batch.as_completed(timeout=60):
        assert_type(done.result(), int)
    assert_type(batch.jobs, list[JobHandle[int] | None])
    assert_type(kinetic.attach(job.job_id).result(), Any)
    assert_type(kinetic.attach_batch(batch.group_id).results(), list[Any])
    assert_type(kinetic.list_jobs(namespace="default"), list[JobHandle[Any]])
    assert_type(kinetic.Data("./data/").path, str)
    assert_type(kinetic.__version__, str)
    try:
        batch.results()
    except kinetic.BatchError as err:
        assert_type(err.failures, list[JobHandle[Any]])


def rejected_calls() -> None:
    square("seven")  # type: ignore[arg-type]
    square(7, 8)  # type: ignore[call-arg]
    greet("Ada", "?")  # type: ignore[call-arg]
    square.run_async(x="7")  # type: ignore[arg-type]
    kinetic.run(backend="k8s")  # type: ignore[arg-type]
    kinetic.run(retries="1")  # type: ignore[arg-type]
    kinetic.run(accelerator="cpu", priority=1)  # type: ignore[call-arg]
    square.run_async(7).result(timeout="1m")  # type: ignore[arg-type]
    square.run_async(7).no_such_method()  # type: ignore[attr-defined]
