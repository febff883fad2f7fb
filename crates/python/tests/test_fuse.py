"""kinetic.Data(..., fuse=True) as arguments and volumes: a read-only
path on the local backend (the data cache entry, bind-mounted) and a GCS
FUSE CSI volume on the fake cluster."""

import pytest

import kinetic


def test_fuse_data_is_a_read_only_path(tmp_path):
    import work

    root = tmp_path / "dataset"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.txt").write_text("beta")
    config = tmp_path / "config.json"
    config.write_text('{"lr": 0.1}')
    assert repr(kinetic.Data(str(config), fuse=True)).endswith("fuse=True)")
    fn = kinetic.run(accelerator="cpu", volumes={"/data": kinetic.Data(str(root), fuse=True)})(work.read_mounted)
    value = fn(kinetic.Data(str(root) + "/", fuse=True), kinetic.Data(str(config), fuse=True))
    assert value == {"a": "alpha", "config": '{"lr": 0.1}', "write": "Read-only file system",
                     "volume": ["a.txt", "sub"]}
    assert not (root / "new.txt").exists()


def test_reserved_mount_paths_and_gs_on_the_local_backend(backend):
    import work

    with pytest.raises(ValueError, match="reserved"):
        kinetic.run(accelerator="cpu", volumes={"/_kinetic/fuse-data/0": kinetic.Data("gs://b/x/", fuse=True)})(
            work.read_text)("x")
    if backend == "local":
        with pytest.raises(Exception, match="no GCS FUSE driver"):
            kinetic.run(accelerator="cpu")(work.read_text)(kinetic.Data("gs://b/x/y.txt", fuse=True))
