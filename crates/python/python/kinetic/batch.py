"""Batches: :class:`BatchHandle`, :class:`BatchError`, :func:`attach_batch`."""

import json
import warnings
import weakref
from typing import Any, Dict, Generic, Iterator, List, Optional, Tuple

from kinetic import _native
from kinetic._errors import translate
from kinetic._values import decode
from kinetic.job_status import JobStatus
from kinetic.jobs import JobHandle, _R, _check_seconds, _client


class BatchError(Exception):
    """Raised when a batch collection has failed children.

    Attributes:
        group_id: The collection's group identifier.
        failures: List of JobHandles for failed children.
        partial_results: List where successful positions contain the result
            and failed positions contain None.
        submission_failures: Per-input errors of inputs never submitted.
    """

    def __init__(self, group_id: str, failures: List[JobHandle], partial_results: List[Any],
                 submission_failures: Optional[Dict[int, Exception]] = None, message: Optional[str] = None):
        super().__init__(message or "batch %s: %d input(s) failed" % (group_id, len(failures)))
        self.group_id = group_id
        self.failures = failures
        self.partial_results = partial_results
        self.submission_failures = dict(submission_failures or {})


def _batch_error(err: "_native.BatchFailed") -> BatchError:
    group_id, failures, partial, submissions, message = err.args
    handles = [JobHandle._from_native(job) for _index, job, _error in failures]
    values = [None if v is None else decode(json.loads(v)) for v in partial]
    return BatchError(group_id, handles, values, {i: translate(e) for i, e in submissions}, message)


# The handles of this process that submit their batch (run_async_map's,
# resumed ones), by group id, for as long as they live.
_SUBMITTING: "weakref.WeakValueDictionary[str, BatchHandle]" = weakref.WeakValueDictionary()


class BatchHandle(Generic[_R]):
    """Handle for a collection of submitted jobs, generic in each job's
    value (``BatchHandle[int]`` in annotations).

    Created by ``run_async_map()`` or reconstructed by
    :func:`kinetic.attach_batch`. Provides collection-level observation,
    result gathering, and cleanup; inputs are submitted in the background
    while it is used.
    """

    def __init__(self, native, submitting: bool = False):
        self._batch = native
        self._cached_failures: Optional[List[JobHandle]] = None
        if submitting:
            _SUBMITTING[native.group_id] = self

    @property
    def group_id(self) -> str:
        """The collection identifier (``grp-…``)."""
        return self._batch.group_id

    @property
    def name(self) -> Optional[str]:
        """The batch's name, if given."""
        return self._batch.name

    @property
    def tags(self) -> Dict[str, str]:
        """The batch's tags."""
        return dict(self._batch.tags)

    @property
    def jobs(self) -> List[Optional[JobHandle]]:
        """Each input's JobHandle, ``None`` where not (yet) submitted."""
        return [None if j is None else JobHandle._from_native(j) for j in self._batch.jobs()]

    def statuses(self) -> List[Tuple[int, JobStatus]]:
        """Return (index, status) for each submitted job."""
        return [(i, JobStatus(s)) for i, s in self._batch.statuses()]

    def status_counts(self) -> Dict[str, int]:
        """Return a count of jobs in each status (``PENDING``, ``RUNNING``,
        ``SUCCEEDED``, ``FAILED``, ``NOT_FOUND``, and inputs not yet submitted
        as ``QUEUED``/``SUBMITTING``/``UNKNOWN``); zero counts are left out."""
        counts = json.loads(self._batch.status_counts())
        return {k.upper(): v for k, v in counts.items() if isinstance(v, int) and v}

    def never_submitted(self) -> List[int]:
        """The inputs no job is known for and none is being submitted for by
        this handle, in input order: the process that submitted the batch
        stopped (was killed) before it submitted them, or has not named them
        in the manifest yet. :meth:`resume` submits them."""
        return list(self._batch.never_submitted())

    def resume(self) -> None:
        """Submit the inputs of this batch that were never submitted — after
        the process that submitted it was killed — with the function, the
        settings and the options the batch was submitted with (recorded in
        its manifest; environment values come from this process). Inputs
        already submitted are followed, never submitted twice; the
        submissions go on in the background while this handle is used.
        Resume a batch from one process at a time.

        Raises:
            ValueError: The batch does not record how it was submitted, is
                being submitted by this handle already, or was cancelled.
        """
        self._batch.resume()
        _SUBMITTING[self.group_id] = self

    def _say_never_submitted(self) -> None:
        """Say at once, before waiting, when inputs were never submitted and
        nothing in this process submits them (a batch whose client was
        killed): waiting alone would not end."""
        missing = self.never_submitted()
        submitter = _SUBMITTING.get(self.group_id)
        if not missing or (submitter is not None and submitter is not self):
            # None, or a handle of this process submits them.
            return
        shown = ", ".join(str(i) for i in missing[:10]) + (", …" if len(missing) > 10 else "")
        warnings.warn("batch %s: %d of %d inputs were never submitted (inputs %s); unless the process that "
                      "submitted the batch is still submitting, they will not run: resume them with "
                      "BatchHandle.resume() (or `kinetic batch resume %s`)"
                      % (self.group_id, len(missing), self._batch.total, shown, self.group_id),
                      RuntimeWarning, stacklevel=3)

    def wait(self, *, timeout: Optional[float] = None) -> None:
        """Block until all jobs reach a terminal state. Warns at once when
        inputs were never submitted (see :meth:`resume`)."""
        _check_seconds("timeout", timeout)
        self._say_never_submitted()
        self._batch.wait(timeout)

    def as_completed(self, *, poll_interval: float = 5.0, timeout: Optional[float] = None) -> Iterator[JobHandle]:
        """Yield jobs as they reach terminal states, in completion order —
        even while more inputs are still being submitted.

        Args:
            poll_interval: Seconds between status polls. The batch polls at
                the interval it was created with; another value than the
                default 5 is checked and warned about.
            timeout: Maximum seconds to wait. Raises TimeoutError if exceeded.
        """
        _check_seconds("poll_interval", poll_interval)
        _check_seconds("timeout", timeout)
        if poll_interval != 5.0:
            warnings.warn("as_completed(poll_interval=%r) is not applied: the batch polls at the interval it "
                          "was created with" % (poll_interval,), stacklevel=2)
        self._say_never_submitted()
        completions = self._batch.as_completed(timeout)
        while True:
            job = completions.next()
            if job is None:
                return
            yield JobHandle._from_native(job)

    def results(self, *, timeout: Optional[float] = None, ordered: bool = True, cleanup: bool = True,
                return_exceptions: bool = False) -> List[Any]:
        """Collect results from all jobs.

        Args:
            timeout: Maximum seconds to wait for all jobs.
            ordered: If True, return in input order. If False, return in
                completion order.
            cleanup: If True, clean up each child's resources (the group
                manifest is preserved).
            return_exceptions: If True, failed positions contain the exception
                object. If False, raise :class:`BatchError` on any failure.

        Returns:
            List of results (input order when ordered=True, completion order
            otherwise).

        Warns at once (``RuntimeWarning``) when inputs were never submitted:
        see :meth:`resume`.
        """
        _check_seconds("timeout", timeout)
        self._say_never_submitted()
        try:
            items = self._batch.results(timeout=timeout, ordered=bool(ordered), cleanup=bool(cleanup),
                                        return_exceptions=bool(return_exceptions))
        except _native.BatchFailed as err:
            error = _batch_error(err)
            self._cached_failures = list(error.failures)
            raise error from None
        out = []
        failed = []
        for index, job_id, value, error in items:
            if error is None:
                out.append(decode(json.loads(value)))
            else:
                out.append(translate(error))
                if job_id is not None:
                    failed.append(index)
        jobs = self.jobs
        self._cached_failures = [jobs[i] for i in failed if i < len(jobs) and jobs[i] is not None]
        return out

    def failures(self) -> List[JobHandle]:
        """Return handles for jobs that failed (status FAILED). After
        results() has been called, the failures that collection saw."""
        if self._cached_failures is not None:
            return list(self._cached_failures)
        return [JobHandle._from_native(j) for j in self._batch.failures()]

    @property
    def submission_failures(self) -> Dict[int, Exception]:
        """Return a copy of per-input submission errors (index -> exception)."""
        return {i: translate(e) for i, e in self._batch.submission_failures()}

    def cancel(self) -> None:
        """Cancel all non-terminal jobs in the collection."""
        self._batch.cancel()

    def cleanup(self, *, k8s: bool = True, gcs: bool = True) -> None:
        """Clean up all jobs (``k8s``) and their artifacts and the group manifest (``gcs``)."""
        self._batch.cleanup(k8s=bool(k8s), gcs=bool(gcs))

    def __repr__(self):
        return "BatchHandle(group_id=%r, name=%r, total=%d)" % (self.group_id, self.name, self._batch.total)


def attach_batch(group_id: str, project: Optional[str] = None, cluster: Optional[str] = None,
                 poll_interval: float = 10.0, poll_timeout: Optional[float] = None) -> BatchHandle:
    """Reattach to an existing batch collection by group_id.

    Reads the group manifest, reconstructs a JobHandle for each child, and
    returns a fully usable BatchHandle. If the manifest has fewer children
    than expected (the original map is still submitting), the handle re-reads
    it every ``poll_interval`` seconds until all children appear or
    ``poll_timeout`` is reached (None: indefinitely).
    """
    _check_seconds("poll_interval", poll_interval)
    _check_seconds("poll_timeout", poll_timeout)
    native = _client(project=project, cluster=cluster).attach_batch(group_id, poll_interval, poll_timeout)
    return BatchHandle(native)
