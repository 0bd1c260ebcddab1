"""Event driving: removing a pod and a container's exit give CPUs back, through the agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.kubelet import pod_cgroup_parent
from agent.simulate.driver import run_scenario
from agent.simulate.machine import load_machine
from agent.simulate.output import render_text
from agent.simulate.scenario import parse_scenario
from agent.workload import QoSClass
from devtools.fake_runtime import FaultyRuntime
from topology.cpuset import CPUSet

# 8 CPUs in one NUMA node; one CPU always stays shared, so 7 can be exclusive.
TOPOLOGY = {"sockets": 1, "cores_per_numa": 4, "threads_per_core": 2}
SIX = [{"name": "main", "cpu": "6", "memory": "1Gi"}]


def run(events: list[dict[str, str]], pods: list[dict[str, Any]] | None = None) -> Any:
    pods = pods or [{"name": "a", "containers": SIX}, {"name": "b", "containers": SIX}]
    scenario = parse_scenario(
        {"topology": TOPOLOGY, "pods": pods, "events": events}, base_dir=Path(".")
    )
    return run_scenario(scenario, load_machine(scenario.topology))


def test_second_big_pod_is_refused_while_the_first_runs() -> None:
    result = run([{"create": "a"}, {"create": "b"}])
    assert [(c.pod, len(CPUSet.parse(c.cpuset_cpus))) for c in result.containers] == [("a", 6)]
    assert [(e.pod, e.code) for e in result.errors] == [("b", "RESOURCE_EXHAUSTED")]


@pytest.mark.parametrize(
    "events",
    [
        [{"create": "a"}, {"remove": "a"}, {"create": "b"}],
        [{"create": "a"}, {"exit": "a/main"}, {"remove": "a"}, {"create": "b"}],
    ],
    ids=["remove", "exit-then-remove"],
)
def test_released_cpus_are_reused(events: list[dict[str, str]]) -> None:
    result = run(events)
    assert result.errors == ()
    assert [c.pod for c in result.containers] == ["b"]  # a is gone or exited
    (b,) = result.containers
    assert b.exclusive and len(CPUSet.parse(b.cpuset_cpus)) == 6


def test_an_exited_container_keeps_its_cpus_until_its_pod_is_removed() -> None:
    """As kubelet's CPU manager: kept for the container's re-creation."""
    result = run([{"create": "a"}, {"exit": "a/main"}, {"create": "b"}])
    assert [(e.pod, e.code) for e in result.errors] == [("b", "RESOURCE_EXHAUSTED")]


def test_a_pod_created_again_after_removal_runs_again() -> None:
    result = run([{"create": "a"}, {"remove": "a"}, {"create": "a"}])
    assert [c.pod for c in result.containers] == ["a"]
    assert result.errors == ()


def test_removing_a_pod_with_a_refused_container() -> None:
    pods = [
        {
            "name": "p",
            "containers": [
                {"name": "huge", "cpu": "8", "memory": "1Gi"},
                {"name": "ok", "cpu": "2", "memory": "1Gi"},
            ],
        },
        {"name": "q", "containers": SIX},
    ]
    result = run([{"create": "p"}, {"remove": "p"}, {"create": "q"}], pods)
    assert [(e.pod, e.name) for e in result.errors] == [("p", "huge")]
    assert [c.pod for c in result.containers] == ["q"]


def test_decisions_are_reported_in_order_with_explanations() -> None:
    result = run([{"create": "a"}, {"remove": "a"}, {"create": "b"}])
    assert [(d.pod, d.name) for d in result.decisions] == [("a", "main"), ("b", "main")]
    assert all(d.pool and d.explanation for d in result.decisions)


def test_requests_reach_the_runtime_shaped_as_kubelet_sends_them() -> None:
    pods: list[dict[str, Any]] = [
        {"name": "shared", "containers": [{"name": "main", "cpu": "500m", "cpu_limit": "2"}]},
        {"name": "a", "containers": SIX},
    ]
    scenario = parse_scenario(
        {"topology": TOPOLOGY, "pods": pods, "events": [{"create": "shared"}, {"create": "a"}]},
        base_dir=Path("."),
    )
    runtime = FaultyRuntime()
    result = run_scenario(scenario, load_machine(scenario.topology), runtime)
    calls = {
        name: [c.request for c in runtime.calls if c.method == name]
        for name in ("RunPodSandbox", "CreateContainer", "UpdateContainerResources")
    }
    shared_pod, a_pod = scenario.pods
    cgroups = [r.config.linux.cgroup_parent for r in calls["RunPodSandbox"]]
    assert cgroups == [
        pod_cgroup_parent(shared_pod.uid, QoSClass.BURSTABLE),
        pod_cgroup_parent(a_pod.uid, QoSClass.GUARANTEED),
    ]
    shared_res, a_res = (r.config.linux.resources for r in calls["CreateContainer"])
    assert (shared_res.cpu_shares, shared_res.cpu_quota, shared_res.cpu_period) == (
        512,  # 500m * 1024 / 1000
        200_000,
        100_000,
    )
    assert a_res.memory_limit_in_bytes == 1024**3
    # The agent wrote the exclusive CPUs into a's create, and moved the shared
    # container off them with an update the runtime received.
    a_cpus = CPUSet.parse(a_res.cpuset_cpus)
    assert len(a_cpus) == 6
    (update,) = calls["UpdateContainerResources"]
    assert CPUSet.parse(update.linux.cpuset_cpus) == result.machine.cpus - a_cpus
    shared = next(c for c in result.containers if c.pod == "shared")
    assert shared.cpuset_cpus == update.linux.cpuset_cpus


def test_without_pinning_cpusets_are_left_alone() -> None:
    scenario = parse_scenario(
        {
            "topology": TOPOLOGY,
            "config": {"pin_cpus": False, "pin_memory": False},
            "pods": [{"name": "a", "containers": SIX}],
        },
        base_dir=Path("."),
    )
    result = run_scenario(scenario, load_machine(scenario.topology))
    (a,) = result.containers
    assert (a.cpuset_cpus, a.cpuset_mems) == ("", "")
    assert "a/main" in render_text(result)
