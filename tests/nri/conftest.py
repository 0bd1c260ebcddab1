"""The plugin against the runtime stand-in over a real unix socket: a NodeAgent
on a fake-sysfs machine, its NRI front door (plugin, session), the stand-in
runtime (devtools/nri_runtime.py), and kubelet's pods created through it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.fingerprint import machine_fingerprint
from agent.nri.plugin import NriPlugin
from agent.nri.runtime import NriRuntime
from agent.nri.session import NriSession
from agent.policy.config import PolicyConfig
from agent.state.store import StateStore
from agent.workload import QoSClass
from devtools.nri_runtime import NriRuntimeStandIn
from proto import cri_pb2
from topology.tree import Machine

GIB = 1 << 30


@dataclass
class Plugged:
    """One agent plugged into the stand-in; `stop` unplugs it (the state file stays)."""

    node: NodeAgent
    runtime: NriRuntime
    plugin: NriPlugin
    session: NriSession

    def stop(self) -> None:
        self.session.stop()
        self.node.close()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # unix socket paths are limited to 108 bytes: pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="nri-") as tmp:
        yield Path(tmp)


@pytest.fixture
def standin(sock_dir: Path) -> Iterator[NriRuntimeStandIn]:
    with NriRuntimeStandIn(sock_dir / "nri.sock") as runtime:
        yield runtime


def fast_backoff(failures: int) -> float:
    return 0.05 if failures else 0.0


@pytest.fixture
def plug(machines: Callable[[str], Machine], tmp_path: Path) -> Iterator[Callable[..., Plugged]]:
    """plug(standin, shape=..., **policy) -> a plugged agent, unplugged at the end."""
    started: list[Plugged] = []

    def make(standin: NriRuntimeStandIn, shape: str = "xeon-2s-2numa", **policy: object) -> Plugged:
        machine = machines(shape)
        runtime = NriRuntime()
        store = StateStore(tmp_path / "state", machine_fingerprint(machine))
        node = NodeAgent(machine, PolicyConfig.from_mapping(policy), runtime, store=store)
        plugin = NriPlugin(node, runtime)
        session = NriSession(standin.path, "90", plugin, runtime, backoff_of=fast_backoff)
        session.start()
        assert standin.wait_ready(10), "the plugin did not register and synchronize"
        plugged = Plugged(node, runtime, plugin, session)
        started.append(plugged)
        return plugged

    yield make
    for plugged in started:
        plugged.stop()


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod the stand-in runs: kubelet's sandbox config and the runtime's sandbox id."""

    config: cri_pb2.PodSandboxConfig
    id: str


def run_pod(
    standin: NriRuntimeStandIn,
    name: str,
    qos: QoSClass = QoSClass.BURSTABLE,
    annotations: dict[str, str] | None = None,
) -> Pod:
    """RunPodSandbox of pod `name` in namespace default, as kubelet sends it."""
    config = kubelet_pod_config(name, "default", f"uid-{name}", qos=qos, annotations=annotations)
    return Pod(config, standin.run_pod(config))


def create_app(
    standin: NriRuntimeStandIn,
    pod: Pod,
    cpu_request_milli: int,
    cpu_limit_milli: int = 0,
    memory_limit_bytes: int = 0,
    *,
    start: bool = True,
) -> str:
    """The pod's container "app" created (RpcError when the plugin refuses it), then
    started unless `start` is False; its id."""
    config = kubelet_container_config(
        pod.config, "app", cpu_request_milli, cpu_limit_milli, memory_limit_bytes
    )
    cid = standin.create_container(pod.id, config)
    if start:
        standin.start_container(cid)
    return cid


def shared_app(standin: NriRuntimeStandIn, name: str = "web") -> str:
    """A running burstable container (half a CPU, shared pool); its id."""
    return create_app(standin, run_pod(standin, name), 500)


def guaranteed_app(
    standin: NriRuntimeStandIn, name: str, cpus: int, annotations: dict[str, str] | None = None
) -> tuple[str, str]:
    """A running guaranteed container of `cpus` whole CPUs (exclusive); its pod's id
    and its own."""
    pod = run_pod(standin, name, QoSClass.GUARANTEED, annotations)
    return pod.id, create_app(standin, pod, cpus * 1000, cpus * 1000, GIB)
