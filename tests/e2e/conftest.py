"""Fixtures for end-to-end tests against a real, private containerd (root only).

Outside CI a host without root or containerd skips these tests with the reason; in CI
(env CI set) the same condition fails them, so CI can never go green by skipping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agent.containerd_env import PrivateContainerd, missing_prerequisites, remove_cgroup
from proto import cri_pb2


def require_containerd() -> None:
    """Skip (or, in CI, fail) when this host cannot run containerd."""
    missing = missing_prerequisites()
    if not missing:
        return
    reason = "end-to-end test needs root and containerd: " + "; ".join(missing)
    if os.environ.get("CI"):
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
    """Pod sandboxes a test ran; whatever the test did not remove is removed afterwards."""

    def __init__(self, containerd: PrivateContainerd) -> None:
        self.containerd = containerd
        self.sandboxes: dict[str, str] = {}  # sandbox id -> cgroup parent

    def track(self, sandbox_id: str, cgroup_parent: str) -> str:
        self.sandboxes[sandbox_id] = cgroup_parent
        return sandbox_id

    def remove_all(self) -> None:
        runtime = self.containerd.runtime()
        for sandbox_id, parent in self.sandboxes.items():
            # RemovePodSandbox also removes the pod's containers.
            try:
                runtime.StopPodSandbox(
                    cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=30
                )
                runtime.RemovePodSandbox(
                    cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=30
                )
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.NOT_FOUND:  # the test removed it itself
                    raise
            remove_cgroup(parent)
        self.sandboxes.clear()


@pytest.fixture
def pods(containerd: PrivateContainerd) -> Iterator[Pods]:
    tracker = Pods(containerd)
    yield tracker
    tracker.remove_all()
