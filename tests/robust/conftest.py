"""Fixtures of the robustness tests: short socket directories, fake machines, the
in-memory runtime on a unix socket, and an agent site (paths for `numa-agent run`)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.node.agent import NodeAgent
from agent.node.runtime_access import GrpcRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.relay.server import RelayServer
from devtools.criclient import CRIClient
from devtools.fakesysfs import write_shape
from tests.node.conftest import make_node  # noqa: F401  (a fixture shared with tests/node)
from tests.robust.harness import RuntimeServer, Site, Stack
from topology.sysfs import read_machine

SHAPE = "desktop-1s-4c-ht"  # 8 CPUs: small enough that crashes contend for every one


@pytest.fixture
def sockdir() -> Iterator[Path]:
    # pytest's tmp_path can exceed the 107-byte unix socket path limit.
    with tempfile.TemporaryDirectory(prefix="na-rb-", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture(scope="session")
def desktop_sysfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_shape(SHAPE, tmp_path_factory.mktemp("sysfs") / SHAPE)


@pytest.fixture
def runtime_server(sockdir: Path) -> Iterator[RuntimeServer]:
    server = RuntimeServer(sockdir / "rt.sock").up()
    yield server
    server.down()


@pytest.fixture
def site(sockdir: Path, desktop_sysfs: Path) -> Iterator[Site]:
    site = Site(sockdir, desktop_sysfs)
    yield site
    site.kill_all()


@pytest.fixture
def stack(sockdir: Path, desktop_sysfs: Path) -> Iterator[Stack]:
    """kubelet -> relay + node agent (in this process, real sockets) -> runtime."""
    server = RuntimeServer(sockdir / "rt.sock").up()
    access = GrpcRuntimeAccess(server.endpoint, timeout=5)
    node = NodeAgent(
        read_machine(desktop_sysfs, cpu_info=False),
        PolicyConfig.from_mapping({"reserved_cpus": "0"}),
        access,
        background_updates=True,
    )
    node.start()
    relay = RelayServer(str(sockdir / "agent.sock"), server.endpoint, hooks=node.relay_hooks())
    relay.start()
    client = CRIClient(relay.path, timeout=5)
    yield Stack(server, node, relay, client)
    client.close()
    relay.stop(0)
    node.close()
    access.close()
    server.down()
