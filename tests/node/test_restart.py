"""Agent restarts: the state file and the runtime's listing give back the same
placements; containers created while the agent was down are adopted without
double-booking; gone ones are forgotten."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import Placement
from agent.state.journal import saved_payload
from agent.workload import QoSClass
from proto import cri_pb2
from tests.node.conftest import MODES, NodeFactory
from topology.cpuset import CPUSet
from topology.tree import Machine


def _by_id(placements: list[Placement]) -> dict[str, tuple[str, str, bool]]:
    return {p.container_id: (p.cpuset_cpus, p.cpuset_mems, p.exclusive) for p in placements}


def _create_behind_agents_back(
    runtime: object, name: str, cpus: int, cpuset: str
) -> tuple[str, str]:
    """What kubelet's own static CPU manager might have done while the agent was down."""
    pod = kubelet_pod_config(name, "default", f"uid-{name}", qos=QoSClass.GUARANTEED)
    rt = runtime
    sandbox = rt.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=pod)).pod_sandbox_id  # type: ignore[attr-defined]
    config = kubelet_container_config(
        pod, name, cpus * 1000, cpus * 1000, 1 << 30, cpuset_cpus=cpuset
    )
    cid = rt.create_container(  # type: ignore[attr-defined]
        cri_pb2.CreateContainerRequest(pod_sandbox_id=sandbox, config=config, sandbox_config=pod)
    ).container_id
    rt.start_container(cri_pb2.StartContainerRequest(container_id=cid))  # type: ignore[attr-defined]
    return sandbox, cid


@pytest.mark.parametrize("mode", MODES)
def test_restart_recovers_placements_and_adopts_without_double_booking(
    make_node: NodeFactory, mode: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = make_node("xeon-2s-2numa", mode, state_dir=state)
    be = first.container(first.pod("batch"), "batch")
    _, g = first.guaranteed("db", 4)
    gone = first.container(first.pod("gone", QoSClass.BURSTABLE), "gone", 500)
    first.settle()
    before = _by_id(first.agent.placements())
    first.agent.close()

    runtime = first.runtime
    # While the agent is down: one container goes, another comes on the same CPUs as db.
    runtime.stop_container(cri_pb2.StopContainerRequest(container_id=gone))
    runtime.remove_container(cri_pb2.RemoveContainerRequest(container_id=gone))
    _, intruder = _create_behind_agents_back(runtime, "cache", 4, first.cpus(g))

    second = make_node("xeon-2s-2numa", mode, runtime=runtime, state_dir=state)
    second.settle()
    after = _by_id(second.agent.placements())
    assert after[g] == before[g] and after[g][2], "db lost its exclusive CPUs"
    assert gone not in after
    db_cpus = CPUSet.parse(after[g][0])
    cache_cpus = CPUSet.parse(second.cpus(intruder))
    assert cache_cpus and cache_cpus.isdisjoint(db_cpus), "the adopted container shares db's CPUs"
    assert CPUSet.parse(after[intruder][0]) == cache_cpus
    assert CPUSet.parse(second.cpus(be)).isdisjoint(db_cpus)
    assert second.cpus(g) == after[g][0]
    # The adopted pod is remembered: its QoS came from its resources (no cgroup parent listed).
    cache = next(p for p in second.agent.placements() if p.container_id == intruder)
    assert (cache.namespace, cache.pod, cache.name) == ("default", "cache", "cache")


def test_state_file_written_before_kubelet_gets_the_answer(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    node = make_node("desktop-1s-4c-ht", "inprocess", state_dir=tmp_path)
    _, g = node.guaranteed("db", 2)
    payload = saved_payload(tmp_path)  # the state file and its journal
    saved = payload["containers"][g]
    assert saved["exclusive_cpus"] == node.cpus(g)
    assert saved["pool"] == node.agent.placements()[0].pool
    assert saved["sent"]["cpu_quota"] == "200000"  # int64 as JSON string (proto3 JSON)
    assert saved["requested"]["cpu_quota"] == 200000
    assert payload["pods"][saved["sandbox"]]["qosclass"] == "Guaranteed"
    node.kubelet.remove_container(g)
    assert g not in saved_payload(tmp_path)["containers"]


def test_start_on_a_busy_node_without_state(make_node: NodeFactory) -> None:
    first = make_node("desktop-1s-4c-ht", "inprocess")
    _, g = first.guaranteed("db", 2)
    be = first.container(first.pod("batch"), "batch")
    # A new agent with no state file: everything is adopted from the runtime's listing.
    second = make_node("desktop-1s-4c-ht", "inprocess", runtime=first.runtime)
    placed = _by_id(second.agent.placements())
    assert placed[g][2] and placed[g][0] == first.cpus(g)
    assert CPUSet.parse(second.cpus(be)) == second.machine.cpus - CPUSet.parse(placed[g][0])


def test_corrupt_state_file_rebuilds_from_the_runtime(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    first = make_node("desktop-1s-4c-ht", "inprocess", state_dir=tmp_path)
    _, g = first.guaranteed("db", 2)
    first.agent.close()
    (tmp_path / "state.json").write_text("{not json")
    second = make_node("desktop-1s-4c-ht", "inprocess", runtime=first.runtime, state_dir=tmp_path)
    assert _by_id(second.agent.placements())[g][0] == first.cpus(g)
    assert list(tmp_path.glob("state.json.rejected-*"))


def test_start_pages_through_a_listing_too_large_for_one_reply(
    machines: Callable[[str], Machine],
) -> None:
    """containerd sends at most 16 MiB: containers with large annotations push the list
    of all containers past it. The agent then lists them pod by pod, and starts."""
    from agent.node.agent import NodeAgent
    from agent.node.runtime_access import InProcessRuntimeAccess
    from agent.policy.config import PolicyConfig
    from agent.relay.backend import BackendError
    from agent.runtime.inprocess import IN_PROCESS_ENDPOINT
    from agent.runtime.memory import MemoryRuntime

    class Capped(InProcessRuntimeAccess):
        def list_containers(self, sandbox_id: str = "") -> list[cri_pb2.Container]:
            if not sandbox_id:
                raise BackendError(
                    "ListContainers",
                    IN_PROCESS_ENDPOINT,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "grpc: trying to send message larger than max (17000000 vs. 16777216)",
                )
            return super().list_containers(sandbox_id)

    runtime = MemoryRuntime()
    cids = [_create_behind_agents_back(runtime, f"p{i}", 1, "")[1] for i in range(3)]
    agent = NodeAgent(machines("xeon-2s-2numa"), PolicyConfig(), Capped(runtime))
    agent.start()
    assert {p.container_id for p in agent.placements()} == set(cids)


def test_start_counts_in_the_log_and_the_status_are_the_same_numbers(
    make_node: NodeFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A restart mixing restored, adopted and adopted-then-moved containers: the log
    line and `NodeAgent.started` (what status shows) agree, and add up to every
    container tracked."""
    import logging
    import re

    state = tmp_path / "state"
    first = make_node("xeon-2s-2numa", "inprocess", state_dir=state)
    first.container(first.pod("batch"), "batch")
    _, g = first.guaranteed("db", 4)
    first.settle()
    first.agent.close()
    runtime = first.runtime
    _create_behind_agents_back(runtime, "cache", 4, first.cpus(g))  # wants db's CPUs
    _create_behind_agents_back(runtime, "web", 2, "")  # on every CPU: moved too
    with caplog.at_level(logging.INFO):
        second = make_node("xeon-2s-2numa", "inprocess", runtime=runtime, state_dir=state)
    line = next(r.message for r in caplog.records if r.message.startswith("started with"))
    numbers = [
        int(n)
        for n in re.findall(
            r"\((\d+) restored.*?(\d+) placed again, (\d+) adopted "
            r"where they run, (\d+) adopted and moved",
            line,
        )[0]
    ]
    started = second.agent.started
    assert numbers == [started.restored, started.replaced, started.adopted, started.moved]
    assert numbers == [2, 0, 0, 2], line  # both want CPUs of their own
    assert f"and {started.total} containers" in line
    assert started.total == len(second.agent.placements()) == 4


def test_a_stranger_adopted_on_a_relist_gets_its_pods_class_from_the_runtime(
    make_node: NodeFactory,
) -> None:
    """A container created behind the agent's back, in a pod the agent never saw
    start: its class comes from the pod's cgroup parent (PodSandboxStatus), so a
    Burstable pod's container with CPU request = limit is not made exclusive."""
    node = make_node("xeon-2s-2numa", "inprocess")
    runtime = node.runtime
    pod = kubelet_pod_config("side", "default", "uid-side", qos=QoSClass.BURSTABLE)
    sandbox = runtime.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=pod)).pod_sandbox_id
    config = kubelet_container_config(pod, "app", 2000, 2000, 1 << 30)
    cid = runtime.create_container(
        cri_pb2.CreateContainerRequest(pod_sandbox_id=sandbox, config=config, sandbox_config=pod)
    ).container_id
    runtime.start_container(cri_pb2.StartContainerRequest(container_id=cid))
    node.kubelet.list_containers()
    placed = {p.container_id: p for p in node.agent.placements()}
    assert cid in placed and not placed[cid].exclusive
