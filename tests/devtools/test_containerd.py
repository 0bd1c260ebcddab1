"""The private containerd's pure parts: its config, mount and cgroup cleanup, pid lookup."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from devtools.containerd import (
    ContainerdError,
    ContainerdPaths,
    mounts_under,
    pid_from_status,
    read_proc_status,
    render_config,
)
from devtools.pods import remove_cgroup
from proto import cri_pb2

CRI = "io.containerd.grpc.v1.cri"


@pytest.mark.parametrize("snapshotter", ["overlayfs", "native"])
def test_config_keeps_everything_under_base_and_suits_this_vm(snapshotter: str) -> None:
    paths = ContainerdPaths(Path("/tmp/numa-x"))
    config = tomllib.loads(render_config(paths, snapshotter=snapshotter, sandbox_image="img:1"))
    assert config["version"] == 2
    assert (config["root"], config["state"]) == ("/tmp/numa-x/root", "/tmp/numa-x/state")
    assert config["grpc"]["address"] == "/tmp/numa-x/containerd.sock"
    assert config["ttrpc"]["address"].startswith("/tmp/numa-x/")
    assert config["plugins"]["io.containerd.internal.v1.opt"]["path"].startswith("/tmp/numa-x/")
    cri = config["plugins"][CRI]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "img:1"
    assert cri["stream_server_port"] == "0"  # a free port: instances never collide
    assert cri["containerd"]["snapshotter"] == snapshotter
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["SystemdCgroup"] is False
    assert runc["options"]["Root"] == "/tmp/numa-x/state/runc"
    assert cri["cni"]["conf_dir"].startswith("/tmp/numa-x/")


@pytest.mark.parametrize("required", [(), ("numa-agent",), ("a", "b")])
@pytest.mark.parametrize("registry", [None, Path("/tmp/numa-x/certs.d")])
def test_containerd2_config_keeps_everything_under_base_with_nri_on(
    required: tuple[str, ...], registry: Path | None
) -> None:
    paths = ContainerdPaths(Path("/tmp/numa-x"))
    text = render_config(
        paths,
        bin_dir=Path("/opt/c2/bin"),
        snapshotter="native",
        sandbox_image="img:1",
        required_plugins=required,
        registry_config_path=registry,
    )
    config = tomllib.loads(text)
    assert config["version"] == 3
    assert (config["root"], config["state"]) == ("/tmp/numa-x/root", "/tmp/numa-x/state")
    assert config["grpc"]["address"] == "/tmp/numa-x/containerd.sock"
    assert config["ttrpc"]["address"] == "/tmp/numa-x/containerd.sock.ttrpc"
    plugins = config["plugins"]
    assert plugins["io.containerd.internal.v1.opt"]["path"] == "/tmp/numa-x/opt"
    images = plugins["io.containerd.cri.v1.images"]
    assert images["snapshotter"] == "native"
    assert images["pinned_images"]["sandbox"] == "img:1"
    assert images["registry"]["config_path"] == (str(registry) if registry else "")
    runtime = plugins["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["BinaryName"] == "/opt/c2/bin/runc"  # the build's runc, not PATH's
    assert runc["options"]["Root"] == "/tmp/numa-x/state/runc"
    assert runtime["cni"]["conf_dir"] == "/tmp/numa-x/cni"
    assert plugins[CRI]["stream_server_port"] == "0"
    nri = plugins["io.containerd.nri.v1.nri"]
    assert nri["disable"] is False
    assert nri["socket_path"] == "/tmp/numa-x/nri.sock"
    assert nri["plugin_path"] == nri["plugin_config_path"] == "/tmp/numa-x/nri-plugins"
    if required:
        assert nri["default_validator"] == {"enable": True, "required_plugins": list(required)}
    else:
        assert "default_validator" not in nri


@pytest.mark.parametrize("bin_dir", [None, Path("/opt/c2/bin")])
def test_config_values_are_written_as_given(bin_dir: Path | None) -> None:
    """Values fill the templates; braces in them are not read as template fields."""
    paths = ContainerdPaths(Path("/tmp/numa-{x}"))
    text = render_config(paths, bin_dir=bin_dir, sandbox_image="reg/{img}:1")
    assert text.count("/tmp/numa-{x}/root") == 1
    assert "reg/{img}:1" in text


@pytest.mark.parametrize(
    ("required", "registry"), [(("numa-agent",), None), ((), Path("/tmp/numa-x/certs.d"))]
)
def test_containerd16_config_refuses_containerd2_settings(
    required: tuple[str, ...], registry: Path | None
) -> None:
    paths = ContainerdPaths(Path("/tmp/numa-x"))
    with pytest.raises(ValueError, match="need containerd 2"):
        render_config(paths, required_plugins=required, registry_config_path=registry)


def mountinfo_line(point: str) -> str:
    return f"100 29 0:52 / {point} rw,relatime shared:1 - overlay overlay rw"


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        (["/", "/tmp/b/state/x/rootfs", "/tmp/b/state/x/rootfs/dev"],
         ["/tmp/b/state/x/rootfs/dev", "/tmp/b/state/x/rootfs"]),
        (["/tmp/b2/rootfs", "/tmp/bb"], []),  # siblings sharing a name prefix are not ours
        (["/tmp/b"], ["/tmp/b"]),
        (["/tmp/b/with\\040space"], ["/tmp/b/with space"]),  # mountinfo escapes spaces
        (["/tmp/b/caf\u00e9"], ["/tmp/b/caf\u00e9"]),
    ],
)  # fmt: skip
def test_mounts_under_base_deepest_first(points: list[str], expected: list[str]) -> None:
    text = "\n".join(mountinfo_line(p) for p in points)
    assert mounts_under(Path("/tmp/b"), text) == [Path(p) for p in expected]


def test_remove_cgroup_removes_empty_pod_dirs_in_every_hierarchy(tmp_path: Path) -> None:
    parent = "/kubepods/besteffort/pod-1"
    empty = [tmp_path / h / parent.strip("/") for h in ("cpuset", "memory")]
    busy = tmp_path / "pids" / parent.strip("/")
    for d in [*empty, busy / "container"]:
        d.mkdir(parents=True)
    remove_cgroup(parent, cgroup_root=tmp_path)
    assert [d.exists() for d in empty] == [False, False]
    assert busy.is_dir(), "a pod cgroup still holding a container stays"
    assert (tmp_path / "cpuset" / "kubepods" / "besteffort").is_dir()


def test_read_proc_status(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "status").write_text(
        "Name:\tsleep\nCpus_allowed:\t2\nCpus_allowed_list:\t1\nMems_allowed_list:\t0\n"
    )
    status = read_proc_status(42, proc=tmp_path)
    assert (status.pid, status.cpus_allowed, status.mems_allowed) == (42, "1", "0")


def test_an_unreadable_proc_status_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "status").write_text("Name:\tsleep\n")
    with pytest.raises(ContainerdError, match=f"{tmp_path}/7/status"):
        read_proc_status(7, proc=tmp_path)
    with pytest.raises(ContainerdError, match=f"{tmp_path}/8/status"):
        read_proc_status(8, proc=tmp_path)


def status_response(info: dict[str, str]) -> cri_pb2.ContainerStatusResponse:
    return cri_pb2.ContainerStatusResponse(status=cri_pb2.ContainerStatus(id="c1"), info=info)


def test_pid_comes_from_verbose_info() -> None:
    response = status_response({"info": json.dumps({"pid": 4242, "sandboxID": "s"})})
    assert pid_from_status(response) == 4242


@pytest.mark.parametrize(
    ("info", "message"),
    [({}, "no verbose info"), ({"info": json.dumps({"pid": 0})}, "no running process")],
)
def test_missing_pid_names_the_container(info: dict[str, str], message: str) -> None:
    with pytest.raises(ContainerdError, match=f"c1.*{message}"):
        pid_from_status(status_response(info))
