"""The kinds of core, as labels and NodeResourceTopology say them: only on machines
whose kernel tells them apart; favoured cores are counted, never a class."""

from __future__ import annotations

import pytest

from agent.introspect.document import machine_layout
from agent.labels import node as n
from agent.labels import numa
from agent.labels.nrt import node_resource_topology
from topology.cpuset import CPUSet
from topology.render import topology_json
from topology.shapes import shape_machine

# shape -> (node labels about kinds of core, NUMA node 0's labels about them)
CASES: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    # 8 P-cores (two favoured) and 8 E-cores: CPUs 0-15 and 16-23.
    "hybrid-desktop": (
        {n.PERFORMANCE_CORES: "8", n.EFFICIENCY_CORES: "8", n.FAVOURED_CORES: "2"},
        {numa.PERFORMANCE_CPUS: "16", numa.EFFICIENCY_CPUS: "8"},
    ),
    "arm-big-little": (
        {n.PERFORMANCE_CORES: "4", n.EFFICIENCY_CORES: "4"},
        {numa.PERFORMANCE_CPUS: "4", numa.EFFICIENCY_CPUS: "4"},
    ),
    # Two cores turbo 200 MHz higher: favoured, but one kind of core.
    "desktop-favoured": ({n.FAVOURED_CORES: "2"}, {}),
    "xeon-2s-2numa": ({}, {}),
}
KIND_LABELS = {n.PERFORMANCE_CORES, n.EFFICIENCY_CORES, n.FAVOURED_CORES}
KIND_NUMA_LABELS = {numa.PERFORMANCE_CPUS, numa.EFFICIENCY_CPUS}


@pytest.mark.parametrize("name", sorted(CASES))
def test_labels_say_the_kinds_of_core(name: str) -> None:
    machine = shape_machine(name)
    want_node, want_numa = CASES[name]
    labels = n.node_labels(machine, virtual=None, physical_host=None)
    assert {k: v for k, v in labels.items() if k in KIND_LABELS} == want_node
    node0 = numa.numa_node_labels(machine)[0]
    assert {k: v for k, v in node0.items() if k in KIND_NUMA_LABELS} == want_numa


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        (
            "hybrid-desktop",
            [
                {"name": "performance-cpus", "value": "0-15"},
                {"name": "efficiency-cpus", "value": "16-23"},
            ],
        ),
        ("desktop-favoured", None),
        ("xeon-2s-2numa", None),
    ],
)
def test_node_resource_topology_zones_list_the_kinds(
    name: str, attributes: list[dict[str, str]] | None
) -> None:
    obj = node_resource_topology(shape_machine(name), node_name="n", reserved_cpus=CPUSet())
    assert obj["zones"][0].get("attributes") == attributes


@pytest.mark.parametrize("name", ["hybrid-desktop", "arm-big-little", "desktop-favoured"])
def test_every_view_says_the_same_kinds(name: str) -> None:
    """`topology --json`, NodeResourceTopology, NUMA-node labels and the machine map's
    layout agree on each node's CPUs of each kind, and on the favoured cores."""
    machine = shape_machine(name)
    document = topology_json(machine)
    nodes = [n for s in document["sockets"] for d in s["dies"] for n in d["numa_nodes"]]
    from_topology = {n["id"]: n.get("cpu_classes", {}) for n in nodes}
    obj = node_resource_topology(machine, node_name="n", reserved_cpus=CPUSet())
    from_nrt = {
        int(z["name"].removeprefix("node-")): {
            a["name"].removesuffix("-cpus"): a["value"] for a in z.get("attributes", [])
        }
        for z in obj["zones"]
    }
    assert from_nrt == from_topology
    labels = numa.numa_node_labels(machine)
    for node_id, classes in from_topology.items():
        counts = {
            cls: labels[node_id].get(f"numa-agent.io/{cls}-cpus")
            for cls in ("performance", "efficiency")
        }
        want = {cls: str(len(CPUSet.parse(classes[cls]))) if classes else None for cls in counts}
        assert counts == want
    layout = machine_layout(machine)
    cores = [
        c
        for s in layout
        for d in s["dies"]
        for n in d["numa_nodes"]
        for g in n["l3_groups"]
        for c in g["cores"]
    ]
    by_class: dict[str, CPUSet] = {}
    for core in cores:
        if core["cpu_class"] is not None:
            by_class[core["cpu_class"]] = by_class.get(core["cpu_class"], CPUSet()) | CPUSet.parse(
                core["cpus"]
            )
    assert {k: str(v) for k, v in by_class.items()} == from_topology[0]
    favoured = CPUSet().union(*(CPUSet.parse(c["cpus"]) for c in cores if c["favoured"]))
    assert str(favoured) == document["favoured_cpus"]
