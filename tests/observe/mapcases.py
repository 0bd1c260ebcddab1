"""Machines with containers placed, for the machine-map tests: a scenario per named
shape run through the real agent (simulate), and what each CPU should show, derived
from the agent's books and the Machine, never from the renderer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.simulate.driver import SimulationResult, run_scenario
from agent.simulate.machine import load_machine
from agent.simulate.scenario import parse_scenario
from topology.cpuset import CPUSet

PREFER_ISOLATED = "prefer-isolated-cpus.cri-resource-manager.intel.com/pod"
# Long enough to be cut on one CPU and on a whole core (Kubernetes allows 63).
LONG_POD = "frontend-with-a-deliberately-long-name-7d9f8b6c4-x2k9q"


def _guaranteed(name: str, cpus: int) -> dict[str, Any]:
    return {"name": name, "cpu": str(cpus), "memory": "256Mi"}


def shape_scenario(shape: str, isolated: bool) -> dict[str, Any]:
    """Exclusive containers of 1, 2 and 3 CPUs (one pod with two), shared ones
    (Burstable, BestEffort), a reserved one, and one preferring isolated CPUs when
    the machine has some."""
    pods: list[dict[str, Any]] = [
        {"name": "db-0", "namespace": "shop", "containers": [_guaranteed("postgres", 2)]},
        {
            "name": LONG_POD,
            "containers": [_guaranteed("server", 1), _guaranteed("sidecar-with-a-long-name", 1)],
        },
        {"name": "worker", "namespace": "batch", "containers": [_guaranteed("main", 3)]},
        {
            "name": "report",
            "namespace": "batch",
            "containers": [{"name": "main", "cpu": "500m", "cpu_limit": "2", "memory": "1Gi"}],
        },
        {"name": "idle", "containers": [{"name": "main"}]},
        {
            "name": "kube-proxy",
            "namespace": "kube-system",
            "containers": [{"name": "kube-proxy", "cpu": "100m", "memory": "64Mi"}],
        },
    ]
    if isolated:
        pods.append(
            {
                "name": "realtime",
                "annotations": {PREFER_ISOLATED: "true"},
                "containers": [_guaranteed("main", 2)],
            }
        )
    return {"topology": {"shape": shape}, "config": {"reserved_cpus": "0"}, "pods": pods}


def run_shape(shape: str) -> SimulationResult:
    # The machine decides whether to ask for isolated CPUs: read it once first.
    probe = parse_scenario(shape_scenario(shape, False), base_dir=Path("."), source=shape)
    isolated = bool(load_machine(probe.topology).isolated)
    scenario = parse_scenario(shape_scenario(shape, isolated), base_dir=Path("."), source=shape)
    return run_scenario(scenario, load_machine(scenario.topology))


@dataclass(frozen=True)
class Expected:
    use: str  # exclusive, shared, reserved, isolated, offline
    owner: str | None  # the exclusive container's id


def expected_cpus(result: SimulationResult) -> dict[int, Expected]:
    """Every CPU of the machine (offline ones too) and what the agent's books make it."""
    owner = {
        cpu: p.container_id
        for p in result.placements
        if p.exclusive
        for cpu in CPUSet.parse(p.cpuset_cpus)
    }
    reserved = result.scenario.config.reserved_cpus
    machine = result.machine
    out: dict[int, Expected] = {}
    for cpu in machine.online:
        if cpu in owner:
            out[cpu] = Expected("exclusive", owner[cpu])
        elif cpu in reserved:
            out[cpu] = Expected("reserved", None)
        elif cpu in machine.isolated:
            out[cpu] = Expected("isolated", None)
        else:
            out[cpu] = Expected("shared", None)
    for cpu in machine.offline:
        out[cpu] = Expected("offline", None)
    return out


def cut_matches(shown: str, full: str) -> bool:
    """`shown` is `full`, or `full` cut in its middle with an ellipsis."""
    if shown == full:
        return True
    head, sep, tail = shown.partition("…")
    return bool(sep) and full.startswith(head) and full.endswith(tail) and len(shown) < len(full)
