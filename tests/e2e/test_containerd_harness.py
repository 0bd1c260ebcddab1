"""The harness itself, against real containerd and runc: cpusets sent over CRI are what the
kernel enforces, and stopping the private containerd leaves no process, mount or cgroup."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from agent.kubelet import kubelet_container_config
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd, read_proc_status
from devtools.pods import remove_cgroup
from proto import cri_pb2

from .conftest import Pods, require_containerd

pytestmark = [pytest.mark.root, pytest.mark.containerd]


def run_sleeper(
    pods: Pods, name: str, cpuset_cpus: str = "", qos: QoSClass = QoSClass.BESTEFFORT
) -> tuple[str, str]:
    """A pod with one `sleep 3600` container; returns (sandbox id, container id)."""
    pod = pods.pod_config(name, qos=qos)
    sandbox_id = pods.run(pod)
    config = kubelet_container_config(
        pod,
        "sleeper",
        image=pods.containerd.image,
        command=["/bin/sleep", "3600"],
        cpuset_cpus=cpuset_cpus,
    )
    return sandbox_id, pods.start_container(sandbox_id, pod, config)


@pytest.mark.parametrize(
    ("created_cpus", "updated_cpus"),
    [("1", "0-1"), ("0-1", "0"), ("0", "1")],
)
def test_cpuset_set_over_cri_is_what_the_kernel_enforces(
    containerd: PrivateContainerd, pods: Pods, created_cpus: str, updated_cpus: str
) -> None:
    _, container_id = run_sleeper(pods, "cpuset", cpuset_cpus=created_cpus)
    client = containerd.client()
    assert containerd.proc_status(container_id).cpus_allowed == created_cpus

    # The full current resources with only the cpuset changed, as the agent sends them.
    current = client.container_status(container_id).status.resources.linux
    assert current.cpuset_cpus == created_cpus
    updated = cri_pb2.LinuxContainerResources()
    updated.CopyFrom(current)
    updated.cpuset_cpus = updated_cpus
    client.update_container_resources(container_id, updated)

    assert containerd.proc_status(container_id).cpus_allowed == updated_cpus
    status = client.container_status(container_id).status
    assert status.state == cri_pb2.CONTAINER_RUNNING
    assert status.resources.linux.cpuset_cpus == updated_cpus
    assert status.resources.linux.cpu_shares == 2  # BestEffort's shares survive the update


@pytest.mark.parametrize("qos", list(QoSClass))
def test_container_without_cpuset_may_run_on_every_cpu(
    containerd: PrivateContainerd, pods: Pods, qos: QoSClass
) -> None:
    sandbox_id, container_id = run_sleeper(pods, "unpinned", qos=qos)
    every_cpu = read_proc_status(1).cpus_allowed  # the host's init is not pinned
    assert containerd.proc_status(container_id).cpus_allowed == every_cpu
    # The container runs in the kubelet-style pod cgroup of its QoS class.
    assert cpuset_cgroup(containerd.pid_of(container_id)) == (
        f"{pods.sandboxes[sandbox_id]}/{container_id}"
    )


def cpuset_cgroup(pid: int) -> str:
    """The process's cgroup in the cpuset hierarchy (v1) or the unified one (v2)."""
    paths = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):  # "" for the v2 line
            paths[controller] = path
    return paths.get("cpuset") or paths[""]


def shims_of(socket: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"containerd-shim-runc-v2") and str(socket).encode() in argv:
                pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("snapshotter", ["overlayfs", "native"])  # native: VMs without overlay
def test_stopping_containerd_with_a_pod_running_leaves_nothing_behind(snapshotter: str) -> None:
    require_containerd()
    base = Path(tempfile.mkdtemp(prefix="numa-e2e-stop-"))
    env = PrivateContainerd(base, snapshotter=snapshotter)
    env.start()
    try:
        pods = Pods(env)
        _, container_id = run_sleeper(pods, "left-running")
        pid = env.pid_of(container_id)
        assert shims_of(env.socket), "a running pod has a shim"
        assert str(base) in Path("/proc/self/mountinfo").read_text()
        assert env.ctr("snapshots", "--snapshotter", snapshotter, "list").count("\n") > 1
    finally:
        env.stop()
    assert not Path(f"/proc/{pid}").exists()
    assert shims_of(env.socket) == []
    assert str(base) not in Path("/proc/self/mountinfo").read_text()
    (parent,) = pods.sandboxes.values()
    pod_cgroup = Path("/sys/fs/cgroup/cpuset", parent.strip("/"))
    assert pod_cgroup.is_dir()  # runc removed the containers' cgroups, not the pod's
    pods.sandboxes.clear()
    remove_cgroup(parent)
    assert not pod_cgroup.exists()
    shutil.rmtree(base)
