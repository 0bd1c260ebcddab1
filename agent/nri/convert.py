"""NRI's view of pods and containers as the CRI messages the node agent reads,
and the agent's cpusets as NRI's resources. Pure functions, no I/O.

The node agent's handlers take kubelet-shaped CRI requests (agent/node/agent.py);
NRI tells the same facts in its own messages: the pod's labels, annotations and
cgroup parent (its QoS class), the container's labels, annotations and resources.
"""

from __future__ import annotations

from typing import Any

from agent.kubelet import POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL
from proto import cri_pb2, nri_pb2

# kubelet's container annotation for how often it has re-created the container:
# the CRI metadata's attempt, which NRI does not pass as such.
RESTART_COUNT = "io.kubernetes.container.restartCount"

_STATES = {
    nri_pb2.CONTAINER_CREATED: cri_pb2.CONTAINER_CREATED,
    nri_pb2.CONTAINER_RUNNING: cri_pb2.CONTAINER_RUNNING,
    nri_pb2.CONTAINER_PAUSED: cri_pb2.CONTAINER_RUNNING,  # still holds its CPUs
    nri_pb2.CONTAINER_STOPPED: cri_pb2.CONTAINER_EXITED,
    nri_pb2.CONTAINER_UNKNOWN: cri_pb2.CONTAINER_UNKNOWN,
}


def attempt_of(container: nri_pb2.Container) -> int:
    text = container.annotations.get(RESTART_COUNT, "0")
    return int(text) if text.isdigit() else 0


def cri_resources(res: nri_pb2.LinuxResources) -> cri_pb2.LinuxContainerResources:
    cpu = res.cpu
    return cri_pb2.LinuxContainerResources(
        cpu_shares=cpu.shares.value,
        cpu_quota=cpu.quota.value,
        cpu_period=cpu.period.value,
        memory_limit_in_bytes=res.memory.limit.value,
        cpuset_cpus=cpu.cpus,
        cpuset_mems=cpu.mems,
    )


def nri_cpusets(cpus: str, mems: str) -> nri_pb2.LinuxResources:
    """Only the cpusets: NRI applies the fields a plugin sets and keeps the rest."""
    return nri_pb2.LinuxResources(cpu=nri_pb2.LinuxCPU(cpus=cpus, mems=mems))


def pod_config(pod: nri_pb2.PodSandbox) -> cri_pb2.PodSandboxConfig:
    return cri_pb2.PodSandboxConfig(
        metadata=cri_pb2.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace),
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        linux=cri_pb2.LinuxPodSandboxConfig(cgroup_parent=pod.linux.cgroup_parent),
    )


def run_pod_request(pod: nri_pb2.PodSandbox) -> cri_pb2.RunPodSandboxRequest:
    return cri_pb2.RunPodSandboxRequest(config=pod_config(pod))


def create_request(
    pod: nri_pb2.PodSandbox, container: nri_pb2.Container
) -> cri_pb2.CreateContainerRequest:
    labels = dict(container.labels)
    # Labels kubelet sets on every container; NRI's pod says them too.
    labels.setdefault(POD_NAME_LABEL, pod.name)
    labels.setdefault(POD_NAMESPACE_LABEL, pod.namespace)
    labels.setdefault(POD_UID_LABEL, pod.uid)
    return cri_pb2.CreateContainerRequest(
        pod_sandbox_id=pod.id,
        config=cri_pb2.ContainerConfig(
            metadata=cri_pb2.ContainerMetadata(name=container.name, attempt=attempt_of(container)),
            labels=labels,
            annotations=dict(container.annotations),
            linux=cri_pb2.LinuxContainerConfig(resources=cri_resources(container.linux.resources)),
        ),
        sandbox_config=pod_config(pod),
    )


def sandbox(pod: nri_pb2.PodSandbox) -> cri_pb2.PodSandbox:
    return cri_pb2.PodSandbox(
        id=pod.id,
        metadata=cri_pb2.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace),
        state=cri_pb2.SANDBOX_READY,
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        runtime_handler=pod.runtime_handler,
    )


def _container_fields(ctr: nri_pb2.Container) -> dict[str, Any]:
    """What a listed CRI Container and a ContainerStatus both say of `ctr`."""
    return {
        "id": ctr.id,
        "metadata": cri_pb2.ContainerMetadata(name=ctr.name, attempt=attempt_of(ctr)),
        "state": _STATES.get(ctr.state, cri_pb2.CONTAINER_UNKNOWN),
        "created_at": ctr.created_at,
        "labels": dict(ctr.labels),
        "annotations": dict(ctr.annotations),
    }


def container(ctr: nri_pb2.Container) -> cri_pb2.Container:
    return cri_pb2.Container(pod_sandbox_id=ctr.pod_sandbox_id, **_container_fields(ctr))


def status(ctr: nri_pb2.Container) -> cri_pb2.ContainerStatus:
    return cri_pb2.ContainerStatus(
        **_container_fields(ctr),
        resources=cri_pb2.ContainerResources(linux=cri_resources(ctr.linux.resources)),
    )
