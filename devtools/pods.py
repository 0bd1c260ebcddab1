"""Pods run as kubelet runs them, through any CRI client: the runtime itself, or the
agent in front of it. Shared by the end-to-end tests and `make demo`; development only.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from pathlib import Path

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.workload import QoSClass
from devtools.criclient import CRIClient
from proto import cri_pb2

CGROUP_ROOT = Path("/sys/fs/cgroup")


def remove_cgroup(parent: str, cgroup_root: Path = CGROUP_ROOT) -> None:
    """Remove an empty pod cgroup from every hierarchy, as kubelet does once a pod is gone.

    runc removes a container's own cgroup but not the pod level above it.
    """
    rel = parent.strip("/")
    if not rel or not cgroup_root.is_dir():
        return
    for hierarchy in [cgroup_root, *sorted(p for p in cgroup_root.iterdir() if p.is_dir())]:
        path = hierarchy / rel
        # Directories still holding tasks or children stay: they are not ours to kill.
        with contextlib.suppress(OSError):  # ENOENT, ENOTEMPTY, EBUSY
            path.rmdir()


def sleeper_config(
    pod: cri_pb2.PodSandboxConfig, qos: QoSClass, milli: int, image: str, name: str = "app"
) -> cri_pb2.ContainerConfig:
    """A container that sleeps, as kubelet asks for it: `milli` CPU requested (and as
    limit with 64 MiB of memory when the pod is Guaranteed)."""
    guaranteed = qos is QoSClass.GUARANTEED
    return kubelet_container_config(
        pod,
        name,
        milli,
        milli if guaranteed else 0,
        64 << 20 if guaranteed else 0,
        image=image,
        command=["/bin/sleep", "3600"],
    )


class PodRunner:
    """Pods run as kubelet with the cgroupfs driver runs them (host network), through
    `client`: the runtime, or the agent in front of it. What was not removed by hand
    goes with `remove_all`, pod cgroups included (`remove_cgroups`: only where a real
    runtime made them)."""

    def __init__(
        self,
        client: CRIClient,
        *,
        log_root: str,
        namespace: str,
        remove_cgroups: bool = True,
    ) -> None:
        self.client = client
        self.log_root = log_root
        self.namespace = namespace
        self.remove_cgroups = remove_cgroups
        self.sandboxes: dict[str, str] = {}  # sandbox id -> cgroup parent

    def pod_config(
        self,
        name: str,
        qos: QoSClass = QoSClass.BESTEFFORT,
        annotations: Mapping[str, str] | None = None,
        uid: str | None = None,
    ) -> cri_pb2.PodSandboxConfig:
        return kubelet_pod_config(
            name,
            self.namespace,
            uid or str(uuid.uuid4()),
            annotations=annotations,
            qos=qos,
            cgroup_driver="cgroupfs",  # the driver PrivateContainerd runs with
            log_root=self.log_root,  # not the host's /var/log/pods
        )

    def run(self, config: cri_pb2.PodSandboxConfig) -> str:
        sandbox_id = self.client.run_pod_sandbox(config)
        self.sandboxes[sandbox_id] = config.linux.cgroup_parent
        return sandbox_id

    def start_container(
        self, sandbox_id: str, pod: cri_pb2.PodSandboxConfig, config: cri_pb2.ContainerConfig
    ) -> str:
        container_id = self.client.create_container(sandbox_id, config, pod)
        self.client.start_container(container_id)
        return container_id

    def remove(self, sandbox_id: str) -> None:
        # RemovePodSandbox also removes the pod's containers.
        self.client.stop_pod_sandbox(sandbox_id)
        self.client.remove_pod_sandbox(sandbox_id)
        parent = self.sandboxes.pop(sandbox_id)
        if self.remove_cgroups:
            remove_cgroup(parent)

    def remove_all(self) -> None:
        for sandbox_id in list(self.sandboxes):
            self.remove(sandbox_id)
