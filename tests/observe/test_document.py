"""The status document's machine layout, over every named machine shape, and the
documented shape of the whole document (docs/observability.md) against a real one."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from agent.introspect.document import AgentInfo, status_document
from agent.observe.process import process_stats
from agent.simulate.driver import SimulationResult
from tests.observe.mapcases import run_shape
from topology.cpuset import CPUSet
from topology.shapes import SHAPES

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
_RESULTS: dict[str, SimulationResult] = {}


def document(shape: str) -> dict[str, Any]:
    if shape not in _RESULTS:
        _RESULTS[shape] = run_shape(shape)
    r = _RESULTS[shape]
    info = AgentInfo("0.1.0", "unix:///run/containerd.sock", "/run/na.sock", "", 0, process_stats())
    return status_document(
        info, r.machine, r.scenario.config.reserved_cpus, r.placements, r.capacity, time.time()
    )


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_layout_is_the_machine_tree(shape: str) -> None:
    doc = document(shape)
    machine = _RESULTS[shape].machine
    layout = doc["machine"]["layout"]
    cores = [
        (core, node["id"])
        for s in layout
        for d in s["dies"]
        for node in d["numa_nodes"]
        for g in node["l3_groups"]
        for core in g["cores"]
    ]
    listed = [cpu for core, _ in cores for cpu in CPUSet.parse(core["cpus"])]
    assert sorted(listed) == list(machine.online), "each online CPU once"
    want = [
        (core.id, str(core.cpus), core.cpu_class, node.id)
        for node in machine.iter_numa_nodes()
        for core in node.cores
    ]
    assert [(c["id"], c["cpus"], c["cpu_class"], n) for c, n in cores] == want
    assert [s["id"] for s in layout] == [s.id for s in machine.sockets]
    assert [n["memory_bytes"] for s in layout for d in s["dies"] for n in d["numa_nodes"]] == [
        n.memory_bytes for n in machine.iter_numa_nodes()
    ]
    assert doc["machine"]["offline_cpus"] == str(machine.offline)
    assert [(m["id"], m["closest_cpu_node"]) for m in doc["machine"]["memory_only_nodes"]] == [
        (m.id, m.closest_cpu_node) for m in machine.memory_only_nodes
    ]


def test_memory_only_nodes_carry_their_distance() -> None:
    doc = document("cxl-memory-only")
    nodes = doc["machine"]["memory_only_nodes"]
    assert [(m["id"], m["closest_cpu_node"], m["distance"]) for m in nodes] == [
        (2, 0, 14),
        (3, 1, 14),
    ]
    assert all(m["memory_bytes"] == 256 << 30 for m in nodes)


def test_containers_carry_their_pool_and_score() -> None:
    doc = document("epyc-2s-nps4")
    books = {p.container_id: p for p in _RESULTS["epyc-2s-nps4"].placements}
    listed = [(pool["name"], c) for pool in doc["pools"] for c in pool["containers"]] + [
        ("reserved", c) for c in doc["reserved"]["containers"]
    ]
    assert {c["container_id"] for _, c in listed} == set(books)
    for pool, c in listed:
        assert c["pool"] == pool == books[c["container_id"]].pool
        assert c["score"] == round(books[c["container_id"]].score, 3)


def _documented() -> dict[str, Any]:
    """The `--json` paragraph as a tree: key -> None (a value) or a dict (an object,
    or a list of objects)."""
    start = DOC.read_text().index("`--json` (document")
    paragraph = DOC.read_text()[start:].split("\n\n", 1)[0]
    tokens = re.findall(r"`([^`]+)`|(\[\{|\}\]|\{\}|\{|\})", paragraph.split("`):", 1)[1])
    stack: list[dict[str, Any]] = [{"version": None}]
    last = ""
    for name, mark in tokens:
        if name:
            last = name
            stack[-1][name] = None
        elif mark in ("{", "[{"):
            stack[-1][last] = {}
            stack.append(stack[-1][last])
        elif mark in ("}", "}]"):
            stack.pop()
        # "{}": an object whose keys are data (pool names), not fields
    assert len(stack) == 1, "unbalanced braces in the documented shape"
    return stack[0]


def _shape(value: Any) -> Any:
    """Like _documented: the keys of objects, lists of objects merged."""
    if isinstance(value, list):
        merged: dict[str, Any] = {}
        for item in value:
            if isinstance(item, dict):
                merged.update(_shape(item))
        return merged or None
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return None


def test_the_documented_shape_is_the_served_one() -> None:
    doc = document("cxl-memory-only")  # memory-only nodes, containers in pools and reserved
    served = _shape(doc)
    served["unknown_pools"] = None  # keys are pool names, values shaped as containers
    documented = _documented()
    documented["unknown_pools"] = None
    # A list of objects that is empty here (reserved containers have the pools' shape).
    served["reserved"]["containers"] = documented["reserved"]["containers"]
    assert documented == served
