"""The observable status of a remote job."""

import enum


class JobStatus(enum.Enum):
    """Observable status of a remote job."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    NOT_FOUND = "NOT_FOUND"

    @property
    def is_terminal(self) -> bool:
        """Whether the job has ended (``SUCCEEDED``, ``FAILED`` or ``NOT_FOUND``)."""
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.NOT_FOUND)
