"""The harness itself, against real containerd and runc: CRI placement reaches the kernel,
and stopping the private containerd leaves no process or mount behind."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from agent.containerd_env import (
    PrivateContainerd,
    container_pid,
    kubelet_cgroup_parent,
    read_proc_status,
    remove_cgroup,
)
from proto import cri_pb2

from .conftest import Pods, require_containerd

pytestmark = [pytest.mark.root, pytest.mark.containerd]


def host_network_pod(name: str, qos: str = "besteffort") -> cri_pb2.PodSandboxConfig:
    uid = str(uuid.uuid4())
    return cri_pb2.PodSandboxConfig(
        metadata=cri_pb2.PodSandboxMetadata(name=name, uid=uid, namespace="e2e"),
        linux=cri_pb2.LinuxPodSandboxConfig(
            cgroup_parent=kubelet_cgroup_parent(qos, uid),
            security_context=cri_pb2.LinuxSandboxSecurityContext(
                # Host network: no CNI needed; hostname must then stay empty.
                namespace_options=cri_pb2.NamespaceOption(
                    network=cri_pb2.NODE, pid=cri_pb2.CONTAINER
                )
            ),
        ),
    )


def run_sleeper(
    containerd: PrivateContainerd,
    pods: Pods,
    pod: cri_pb2.PodSandboxConfig,
    resources: cri_pb2.LinuxContainerResources,
) -> str:
    runtime = containerd.runtime()
    sandbox_id = runtime.RunPodSandbox(
        cri_pb2.RunPodSandboxRequest(config=pod), timeout=30
    ).pod_sandbox_id
    pods.track(sandbox_id, pod.linux.cgroup_parent)
    config = cri_pb2.ContainerConfig(
        metadata=cri_pb2.ContainerMetadata(name="sleeper"),
        image=cri_pb2.ImageSpec(image=containerd.image),
        command=["/bin/sleep", "3600"],
        linux=cri_pb2.LinuxContainerConfig(resources=resources),
    )
    container_id = runtime.CreateContainer(
        cri_pb2.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=config, sandbox_config=pod
        ),
        timeout=30,
    ).container_id
    runtime.StartContainer(cri_pb2.StartContainerRequest(container_id=container_id), timeout=30)
    return container_id


@pytest.mark.parametrize(
    ("created_cpus", "updated_cpus"),
    [("1", "0-1"), ("0-1", "0"), ("0", "1")],
)
def test_cpuset_set_over_cri_is_what_the_kernel_enforces(
    containerd: PrivateContainerd, pods: Pods, created_cpus: str, updated_cpus: str
) -> None:
    resources = cri_pb2.LinuxContainerResources(
        cpu_period=100000, cpu_shares=2, cpuset_cpus=created_cpus, cpuset_mems="0"
    )
    container_id = run_sleeper(containerd, pods, host_network_pod("cpuset"), resources)
    pid = container_pid(containerd.runtime(), container_id)
    assert read_proc_status(pid).cpus_allowed == created_cpus
    assert read_proc_status(pid).mems_allowed == "0"

    # Full current resources with only the cpuset changed, as the agent sends them.
    updated = cri_pb2.LinuxContainerResources()
    updated.CopyFrom(resources)
    updated.cpuset_cpus = updated_cpus
    containerd.runtime().UpdateContainerResources(
        cri_pb2.UpdateContainerResourcesRequest(container_id=container_id, linux=updated),
        timeout=30,
    )
    assert read_proc_status(pid).cpus_allowed == updated_cpus
    status = containerd.runtime().ContainerStatus(
        cri_pb2.ContainerStatusRequest(container_id=container_id), timeout=10
    )
    assert status.status.state == cri_pb2.CONTAINER_RUNNING
    assert status.status.resources.linux.cpuset_cpus == updated_cpus
    assert status.status.resources.linux.cpu_shares == 2  # kept, not reset by the update


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


def test_stopping_containerd_with_pods_running_leaves_nothing_behind() -> None:
    require_containerd()
    base = Path("/tmp") / f"numa-e2e-stop-{uuid.uuid4().hex[:8]}"
    env = PrivateContainerd(base)
    env.start()
    try:
        pods = Pods(env)
        container_id = run_sleeper(
            env, pods, host_network_pod("left-running"), cri_pb2.LinuxContainerResources()
        )
        pid = container_pid(env.runtime(), container_id)
        assert shims_of(env.socket), "a running pod has a shim"
        assert str(base) in Path("/proc/self/mountinfo").read_text()
    finally:
        env.stop()
    assert not Path(f"/proc/{pid}").exists()
    assert shims_of(env.socket) == []
    assert str(base) not in Path("/proc/self/mountinfo").read_text()
    for parent in pods.sandboxes.values():
        remove_cgroup(parent)
        assert not Path("/sys/fs/cgroup/cpuset", parent.strip("/")).exists()
    shutil.rmtree(base)
