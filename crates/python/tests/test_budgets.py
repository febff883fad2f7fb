"""Failure budgets from the Python API: retries=, restarts=, and the
attempt history on the handle."""

import pytest

import kinetic


def test_a_retry_absorbs_one_failure_and_the_handle_keeps_both_attempts(tmp_path):
    import work

    marker = str(tmp_path / "marker")
    flaky = kinetic.run(accelerator="cpu", retries=1)(work.flaky)
    handle = flaky.run_async(marker)
    assert handle.result() == "second attempt"
    attempts = handle.attempts()
    assert [a["outcome"] for a in attempts] == ["failed", "succeeded"], attempts
    assert attempts[0]["number"] == 1 and attempts[1]["number"] == 2


def test_without_retries_the_first_failure_is_final(tmp_path):
    import work

    flaky = kinetic.run(accelerator="cpu")(work.flaky)
    with pytest.raises(RuntimeError, match="first attempt fails"):
        flaky(str(tmp_path / "marker"))


def test_budgets_must_be_whole_numbers():
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(ValueError, match="retries="):
            kinetic.run(accelerator="cpu", retries=bad)
    with pytest.raises(ValueError, match="restarts="):
        kinetic.run(accelerator="cpu", restarts=-2)
