"""Fixtures of the observability tests: fake machines and an in-process node agent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.runtime.memory import MemoryRuntime
from agent.workload import QoSClass
from tests.node.conftest import InProcessKubelet
from topology.tree import Machine


@dataclass
class Recorder:
    """A PlacementObserver that remembers what it was told."""

    decisions: list[float] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    def decided(self, seconds: float) -> None:
        self.decisions.append(seconds)

    def refused(self, reason: str) -> None:
        self.refusals.append(reason)


@dataclass
class LocalNode:
    agent: NodeAgent
    kubelet: InProcessKubelet
    observer: Recorder

    def create(
        self,
        pod: str,
        container: str,
        milli: int,
        limit: int,
        *,
        qos: QoSClass = QoSClass.GUARANTEED,
        annotations: dict[str, str] | None = None,
    ) -> str:
        config = kubelet_pod_config(pod, "default", f"uid-{pod}", annotations=annotations, qos=qos)
        sandbox = self.kubelet.run_pod_sandbox(config)
        ctr = kubelet_container_config(config, container, milli, limit, 1 << 30)
        return self.kubelet.create_container(sandbox, ctr, config)


@pytest.fixture
def local_node(machines: Callable[[str], Machine]) -> Iterator[LocalNode]:
    """desktop-1s-4c-ht (8 CPUs) with the in-process runtime and a recording observer."""
    runtime = MemoryRuntime()
    observer = Recorder()
    agent = NodeAgent(
        machines("desktop-1s-4c-ht"),
        PolicyConfig(),
        InProcessRuntimeAccess(runtime),
        observer=observer,
    )
    agent.start()
    yield LocalNode(agent, InProcessKubelet(agent, runtime), observer)
    agent.close()


@pytest.fixture
def sockdir(tmp_path: Path) -> Iterator[Path]:
    """A short directory for unix sockets (tmp_path can exceed the 107-byte limit)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="na-obs-", dir="/tmp") as d:
        yield Path(d)
