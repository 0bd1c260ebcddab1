"""A storm of CreateContainer calls through the real relay (`numa-agent run`):
64 Guaranteed containers of 3 CPUs on an 80-CPU machine that fits only some.
No exclusive CPU is handed out twice, the refused get RESOURCE_EXHAUSTED and
never reach the runtime, the state file matches what the runtime was told, and
pass-through calls keep being answered meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from agent.kubelet import kubelet_container_config
from devtools.criclient import CRIClient, CRIError
from devtools.fakesysfs import write_shape
from tests.robust.harness import RuntimeServer, Site, books_problems, live, run_pod
from topology.cpuset import CPUSet

CALLS = 64
CPUS_EACH = 3


@pytest.fixture(scope="module")
def xeon_sysfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_shape("xeon-2s-2numa", tmp_path_factory.mktemp("xeon") / "sysfs")


@pytest.fixture
def xeon_site(sockdir: Path, xeon_sysfs: Path) -> Iterator[Site]:
    site = Site(sockdir, xeon_sysfs, "reserved_cpus: '0,40'\nlog_format: json\n")
    yield site
    site.kill_all()  # a failing test leaves no agent running


def test_create_storm(xeon_site: Site, runtime_server: RuntimeServer) -> None:
    site = xeon_site
    agent = site.start(runtime_server.endpoint)
    with agent.client(timeout=30) as setup:
        pods = [run_pod(setup, f"p{i}") for i in range(CALLS)]

    start = threading.Barrier(CALLS + 1)
    storm_over = threading.Event()

    def kubelet(index: int) -> str | grpc.StatusCode:
        sandbox, pod = pods[index]
        milli = CPUS_EACH * 1000
        config = kubelet_container_config(pod, "app", milli, milli, 1 << 30)
        with CRIClient(str(site.listen), timeout=30) as client:
            start.wait()
            try:
                return client.create_container(sandbox, config, pod)
            except CRIError as err:
                return err.code

    latencies: list[float] = []
    failures: list[CRIError] = []

    def passthrough() -> None:
        with CRIClient(str(site.listen), timeout=30) as client:
            start.wait()
            while not storm_over.is_set():
                for call in (client.version, client.list_containers):
                    began = time.monotonic()
                    try:
                        call()
                    except CRIError as err:
                        failures.append(err)
                    latencies.append(time.monotonic() - began)

    watcher = threading.Thread(target=passthrough)
    watcher.start()
    with ThreadPoolExecutor(CALLS) as pool:
        outcomes = list(pool.map(kubelet, range(CALLS)))
    storm_over.set()
    watcher.join(30)

    created = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if not isinstance(o, str)]
    assert set(refused) <= {grpc.StatusCode.RESOURCE_EXHAUSTED}, refused
    assert created and refused, "the machine should fit some but not all"
    running = live(runtime_server.runtime)
    assert set(running) == set(created)  # the refused never reached the runtime
    held = CPUSet()
    for cid in created:
        cpus = running[cid]
        assert len(cpus) == CPUS_EACH
        assert held.isdisjoint(cpus), f"CPUs {held & cpus} handed out twice"
        held = held | cpus
    assert held.isdisjoint(CPUSet.parse("0,40"))
    # Refused only for lack of room: what is left cannot hold one more.
    assert 78 - len(held) < CPUS_EACH + 1, (len(created), held)
    assert books_problems(runtime_server.runtime, agent.state()) == []
    assert not failures, failures
    assert latencies, "no pass-through call was made during the storm"
    print(
        f"\n{len(created)} created, {len(refused)} refused; {len(latencies)} pass-through calls "
        f"during the storm, max {max(latencies) * 1000:.0f} ms"
    )
    assert agent.stop()[0] == 0
