"""The plugin against the runtime stand-in over a real unix socket: a NodeAgent
on a fake-sysfs machine, its NRI front door (plugin, session), and the stand-in
runtime (devtools/nri_runtime.py) that kubelet's pods are created through."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.node.agent import NodeAgent
from agent.node.fingerprint import machine_fingerprint
from agent.nri.plugin import NriPlugin
from agent.nri.runtime import NriRuntime
from agent.nri.session import NriSession
from agent.policy.config import PolicyConfig
from agent.state.store import StateStore
from devtools.nri_runtime import NriRuntimeStandIn
from topology.tree import Machine


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
