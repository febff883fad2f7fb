"""Errors raised in Python name Python's parameters, and a first run with
nothing configured says what to set."""

import pytest

import kinetic


@pytest.fixture
def nothing_configured(monkeypatch):
    # A fresh HOME (conftest) and no target: no backend, project or cluster
    # named anywhere, as on a new laptop.
    for name in ("KINETIC_BACKEND", "KINETIC_PROJECT", "KINETIC_CLUSTER", "KINETIC_ZONE", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)


def _no_command_line_flags(text):
    for flag in ("--accelerator", "--backend", "--project", "--cluster", "--spot"):
        assert flag not in text, (flag, text)


def test_the_default_tpu_with_no_cluster_configured_says_what_to_set(nothing_configured):
    import work

    square = kinetic.run()(work.square)  # the default accelerator: tpu-v5e-1
    with pytest.raises(ValueError) as info:
        square(3)
    text = str(info.value)
    for part in ('accelerator="cpu"', 'backend="gke" or "pathways"', "project= and cluster=",
                 "KINETIC_PROJECT and KINETIC_CLUSTER", "`kinetic up`"):
        assert part in text, (part, text)
    _no_command_line_flags(text)


def test_gpus_this_host_lacks_are_refused_naming_python_parameters(nothing_configured, monkeypatch):
    import work

    monkeypatch.setenv("KINETIC_LOCAL_GPUS", "0")
    with pytest.raises(ValueError) as info:
        kinetic.run(accelerator="gpu-l4")(work.square)(3)
    text = str(info.value)
    assert "needs 1 GPU but this host has 0" in text and 'accelerator="cpu"' in text, text
    assert 'backend="gke"' in text, text
    _no_command_line_flags(text)


def test_spot_on_this_host_is_refused_naming_the_spot_parameter(nothing_configured):
    import work

    with pytest.raises(ValueError) as info:
        kinetic.run(accelerator="cpu", spot=True)(work.square)(3)
    text = str(info.value)
    assert "drop spot=True" in text and 'backend="gke"' in text, text
    _no_command_line_flags(text)


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:9"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {}
"""


def test_a_cluster_backend_without_a_project_names_the_project_parameter(nothing_configured, monkeypatch,
                                                                           tmp_path):
    import work

    monkeypatch.delenv("KINETIC_STORE_URL", raising=False)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    with pytest.raises(ValueError) as info:
        kinetic.run(accelerator="cpu", backend="gke")(work.square)(3)
    text = str(info.value)
    assert "no project is configured; set project=, KINETIC_PROJECT or a profile" in text, text
    _no_command_line_flags(text)
