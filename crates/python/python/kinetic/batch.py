"""Batches: :class:`BatchHandle`, :class:`BatchError`, :func:`attach_batch`."""

import json
import threading
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

    ``BatchHandle(group_id, name, tags, jobs)`` — Kinetic's constructor —
    makes one over jobs submitted already: input ``i`` is ``jobs[i]``
    (``None``: an input that was never submitted), and every input is
    submitted. The private parameters are Kinetic's too: ``_project`` is
    the project whose store the handle uses; ``_bucket_name``, when given,
    must be the jobs' bucket; ``_submission_complete``, when given, must be
    set (a handle made from a list has all its jobs); ``_submission_error``
    is raised by ``wait()``/``results()``/``as_completed()``;
    ``_submission_errors`` (index → exception) are those inputs' errors in
    ``results()`` and ``submission_failures``; ``_cached_failures`` is what
    ``failures()`` gives until ``results()`` runs; ``_lock`` is accepted
    for Kinetic's signature (the engine locks the handle's state itself).
    """

    def __init__(self, group_id: str, name: Optional[str], tags: Dict[str, str],
                 jobs: List[Optional[JobHandle]], _bucket_name: str = "", _project: str = "",
                 _submission_complete: Optional[threading.Event] = None,
                 _submission_error: Optional[BaseException] = None, _lock: Any = None,
                 _submission_errors: Optional[Dict[int, Exception]] = None,
                 _cached_failures: Optional[List[JobHandle]] = None):
        if not isinstance(group_id, str):
            raise TypeError("BatchHandle(group_id=%r): expected the batch's id, a str such as 'grp-1a2b3c4d'"
                            % (group_id,))
        if name is not None and not isinstance(name, str):
            raise TypeError("BatchHandle(name=%r): expected a str or None" % (name,))
        if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
            raise TypeError("BatchHandle(tags=%r): expected a dict of str to str" % (tags,))
        if not isinstance(jobs, (list, tuple)) or not all(j is None or isinstance(j, JobHandle) for j in jobs):
            raise TypeError("BatchHandle(jobs=%r): expected a list of JobHandle (None for an input never "
                            "submitted)" % (jobs,))
        buckets = sorted({j.bucket_name for j in jobs if j is not None})
        if _bucket_name and any(b != _bucket_name for b in buckets):
            raise ValueError("BatchHandle(_bucket_name=%r): the jobs are in bucket(s) %s; a batch's bucket is "
                             "its jobs'" % (_bucket_name, ", ".join(buckets)))
        if _submission_complete is not None and not _submission_complete.is_set():
            raise ValueError("BatchHandle(_submission_complete=<unset Event>): a handle made from a list of jobs "
                             "has every job it will have; set the event (or leave it out), or use "
                             "kinetic.attach_batch() for a batch still being submitted")
        if _lock is not None and not (hasattr(_lock, "acquire") and hasattr(_lock, "release")):
            raise TypeError("BatchHandle(_lock=%r): expected a lock (threading.Lock) or None" % (_lock,))
        errors = dict(_submission_errors or {})
        for index, error in errors.items():
            if not isinstance(index, int) or not 0 <= index < len(jobs) or not isinstance(error, BaseException):
                raise ValueError("BatchHandle(_submission_errors=...): expected {input index: exception} with "
                                 "indices 0 to %d, got %r: %r" % (len(jobs) - 1, index, error))
            if jobs[index] is not None:
                raise ValueError("BatchHandle(_submission_errors=...): input %d has a job (%s); a submission "
                                 "error belongs to an input never submitted (jobs[%d] is None)"
                                 % (index, jobs[index].job_id, index))
        project = _project or next((j.project for j in jobs if j is not None and j.project), None)
        native = _client(project=project or None).batch_of(
            group_id, name, dict(tags), [None if j is None else json.dumps(j.to_dict()) for j in jobs])
        self._setup(native)
        # The caller said which inputs were never submitted (None).
        self._from_list = True
        self._submission_error = _submission_error
        self._given_errors = errors
        if _cached_failures is not None:
            self._cached_failures = list(_cached_failures)

    @classmethod
    def _from_native(cls, native, submitting: bool = False) -> "BatchHandle":
        handle = cls.__new__(cls)
        handle._setup(native)
        if submitting:
            _SUBMITTING[native.group_id] = handle
        return handle

    def _setup(self, native) -> None:
        self._batch = native
        self._cached_failures: Optional[List[JobHandle]] = None
        self._submission_error: Optional[BaseException] = None
        self._given_errors: Dict[int, Exception] = {}
        self._from_list = False

    def _raise_submission_error(self) -> None:
        if self._submission_error is not None:
            raise self._submission_error

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
        if self._from_list:
            return
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
        self._raise_submission_error()
        self._say_never_submitted()
        self._batch.wait(timeout)

    def as_completed(self, *, poll_interval: float = 5.0, timeout: Optional[float] = None) -> Iterator[JobHandle]:
        """Yield jobs as they reach terminal states, in completion order —
        even while more inputs are still being submitted.

        Args:
            poll_interval: Seconds between status polls while no job ended
                (a backend that announces jobs ending, as the local one
                does, wakes the loop at once).
            timeout: Maximum seconds to wait. Raises TimeoutError if exceeded.
        """
        _check_seconds("poll_interval", poll_interval)
        _check_seconds("timeout", timeout)
        if poll_interval <= 0:
            raise ValueError("poll_interval=%r: expected a number of seconds above zero" % (poll_interval,))
        self._raise_submission_error()
        self._say_never_submitted()
        completions = self._batch.as_completed(timeout, float(poll_interval))
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
        self._raise_submission_error()
        self._say_never_submitted()
        try:
            items = self._batch.results(timeout=timeout, ordered=bool(ordered), cleanup=bool(cleanup),
                                        return_exceptions=bool(return_exceptions))
        except _native.BatchFailed as err:
            error = _batch_error(err)
            error.submission_failures.update(self._given_errors)
            self._cached_failures = list(error.failures)
            raise error from None
        out = []
        failed = []
        for index, job_id, value, error in items:
            if error is None:
                out.append(decode(json.loads(value)))
            elif index in self._given_errors:
                out.append(self._given_errors[index])
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
        errors = {i: translate(e) for i, e in self._batch.submission_failures()}
        errors.update(self._given_errors)
        return errors

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
    return BatchHandle._from_native(native)
