"""Fixtures for end-to-end tests against a real, private containerd (root only).

Outside CI a host without root or containerd skips these tests with the reason; in CI
(env CI set) the same condition fails them, so CI can never go green by skipping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from agent.containerd_env import PrivateContainerd, missing_prerequisites, remove_cgroup
from agent.criclient import CRIClient, kubelet_pod_config
from agent.workload import QoSClass
from proto import cri_pb2


def require_containerd() -> None:
    """Skip (or, in CI, fail) when this host cannot run containerd."""
    missing = missing_prerequisites()
    if not missing:
        return
    reason = "end-to-end test needs root and containerd: " + "; ".join(missing)
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def containerd() -> Iterator[PrivateContainerd]:
    """One private containerd for the whole session, stopped with all it ran at the end."""
    require_containerd()
    # Not tmp_path_factory: its paths can push the socket past the 107-byte unix limit.
    base = Path(tempfile.mkdtemp(prefix="numa-e2e-"))
    env = PrivateContainerd(base)
    try:
        env.start()
        yield env
    finally:
        env.stop()
        shutil.rmtree(base, ignore_errors=True)


class Pods:
    """Pods a test runs through `client` (containerd, or the agent in front of it); whatever
    the test did not remove is removed afterwards, with its pod cgroup."""

    def __init__(self, containerd: PrivateContainerd, client: CRIClient | None = None) -> None:
        self.containerd = containerd
        self.client = client or containerd.client()
        self.sandboxes: dict[str, str] = {}  # sandbox id -> cgroup parent

    def pod_config(
        self,
        name: str,
        qos: QoSClass = QoSClass.BESTEFFORT,
        annotations: Mapping[str, str] | None = None,
    ) -> cri_pb2.PodSandboxConfig:
        """A host-network pod as kubelet with the cgroupfs driver would send it."""
        return kubelet_pod_config(
            name,
            "e2e",
            str(uuid.uuid4()),
            annotations=annotations,
            qos=qos,
            cgroup_driver="cgroupfs",  # the driver this containerd runs with
            log_root=str(self.containerd.pod_log_root),
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
        remove_cgroup(self.sandboxes.pop(sandbox_id))

    def remove_all(self) -> None:
        for sandbox_id in list(self.sandboxes):
            self.remove(sandbox_id)


@pytest.fixture
def pods(containerd: PrivateContainerd) -> Iterator[Pods]:
    tracker = Pods(containerd)
    yield tracker
    tracker.remove_all()
