"""Restart events in `simulate`: `keep` changes nothing, on every shape; `lost` and
`corrupt` keep exclusive CPUs with their owners, give no CPU twice, and adopt the
rest from what the runtime reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from agent.simulate.driver import SimulationResult, run_scenario
from agent.simulate.output import render_text, to_json
from agent.simulate.scenario import (
    CreatePod,
    Event,
    RemovePod,
    Restart,
    Scenario,
    ScenarioError,
    parse_scenario,
)
from topology.cpuset import CPUSet
from topology.shapes import SHAPES
from topology.tree import Machine

Machines = Callable[[str], Machine]


def scenario(machine: Machine, shape: str) -> Scenario:
    """The issue's case on any shape: db fills the first NUMA node's CPUs (minus one if
    the machine has only that node, so one CPU stays shared), api is pulled towards
    it, a BestEffort batch runs beside them, and db goes."""
    first = next(machine.iter_numa_nodes())
    fill = len(first.cpus) - (1 if len(machine.cpus) == len(first.cpus) else 0)
    data = {
        "topology": {"shape": shape},
        "pods": [
            {"name": "db", "containers": [{"name": "main", "cpu": str(fill), "memory": "1Gi"}]},
            {
                "name": "api",
                "annotations": {
                    "cri-resource-manager.intel.com/affinity": (
                        "main: [{scope: {key: pod/name, operator: Equals, values: [db]}, "
                        "match: {key: name, operator: Equals, values: [main]}, weight: 10}]"
                    )
                },
                "containers": [{"name": "main", "cpu": "500m", "memory": "256Mi"}],
            },
            {"name": "batch", "containers": [{"name": "main"}]},
            {"name": "cache", "containers": [{"name": "main", "cpu": "1", "memory": "1Gi"}]},
        ],
        "events": [
            {"create": "db"},
            {"create": "api"},
            {"create": "batch"},
            {"remove": "db"},
            {"create": "cache"},
            {"create": "db"},
        ],
    }
    return parse_scenario(data, base_dir=Path("."), source=f"{shape}.yaml")


def run(machine: Machine, s: Scenario, events: tuple[Event, ...]) -> SimulationResult:
    return run_scenario(replace(s, events=events), machine)


def outputs(result: SimulationResult) -> tuple[str, object]:
    return render_text(result), to_json(result)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_restart_keep_changes_no_output_on_any_shape(machines: Machines, shape: str) -> None:
    machine = machines(shape)
    s = scenario(machine, shape)
    without = outputs(run(machine, s, s.events))
    for at in range(len(s.events) + 1):
        events = (*s.events[:at], Restart("keep"), *s.events[at:])
        assert outputs(run(machine, s, events)) == without, f"{shape}: restart after event {at}"


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("state", ["lost", "corrupt"])
def test_restart_without_a_state_file_keeps_exclusive_cpus(
    machines: Machines, shape: str, state: str
) -> None:
    machine = machines(shape)
    s = scenario(machine, shape)
    for at in range(1, len(s.events) + 1):
        before = run(machine, s, s.events[:at])
        after = run(machine, s, (*s.events[:at], Restart(state)))
        held = {(c.pod, c.name): c for c in before.containers}
        assert {(c.pod, c.name) for c in after.containers} == set(held), f"{shape} at {at}"
        for c in after.containers:
            mine = CPUSet.parse(c.cpuset_cpus)
            if held[c.pod, c.name].exclusive:
                assert c.exclusive and c.cpuset_cpus == held[c.pod, c.name].cpuset_cpus
            for other in after.containers:
                if other is not c and c.exclusive:
                    assert mine.isdisjoint(CPUSet.parse(other.cpuset_cpus)), (shape, at)
            # Adopted from what the runtime reported: the same CPUs it ran on.
            assert mine == CPUSet.parse(held[c.pod, c.name].cpuset_cpus), (shape, at, c.pod)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"restart": "maybe"}, "restart: expected one of keep, lost, corrupt, got 'maybe'"),
        ({"restart": ["keep"]}, "restart: expected one of keep, lost, corrupt"),
        (
            {"restart": "keep", "create": "db"},
            "expected exactly one of create, remove, exit, recreate, resize, restart",
        ),
    ],
)
def test_bad_restart_events_name_the_event(event: dict[str, object], message: str) -> None:
    data = {
        "topology": {"shape": "desktop-1s-4c-ht"},
        "pods": [{"name": "db", "containers": [{"name": "main"}]}],
        "events": [{"create": "db"}, event],
    }
    with pytest.raises(ScenarioError, match=r"events\[1\]: " + message.replace("[", r"\[")):
        parse_scenario(data, base_dir=Path("."), source="s.yaml")


def test_restart_events_parse() -> None:
    data = {
        "topology": {"shape": "desktop-1s-4c-ht"},
        "pods": [{"name": "db", "containers": [{"name": "main"}]}],
        "events": [{"create": "db"}, {"restart": "keep"}, {"remove": "db"}, {"restart": "corrupt"}],
    }
    events = parse_scenario(data, base_dir=Path("."), source="s.yaml").events
    assert events == (
        CreatePod("default/db"),
        Restart("keep"),
        RemovePod("default/db"),
        Restart("corrupt"),
    )
