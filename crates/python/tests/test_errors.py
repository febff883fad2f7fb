"""How a job's error comes back: a worker host's failure of a multi-host
job carries the host report as a note."""

from kinetic import _errors, _native


def test_a_worker_hosts_failure_carries_the_host_as_a_note():
    native = _native.RemoteJobError("job-1", "ValueError", "host 2 failed", None, "execute",
                                    "Job job-1: reported by host 2 of 4; other hosts that also reported a failure: 3.")
    err = _errors.rebuild(native)
    assert isinstance(err, ValueError) and str(err) == "host 2 failed"
    assert err.__notes__ == ["Job job-1: reported by host 2 of 4; other hosts that also reported a failure: 3."]


def test_a_leaders_failure_has_no_note():
    native = _native.RemoteJobError("job-1", "KeyError", "k", None, "execute", None)
    err = _errors.rebuild(native)
    assert isinstance(err, KeyError)
    assert not getattr(err, "__notes__", None)
