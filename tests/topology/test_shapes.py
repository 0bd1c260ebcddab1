"""Every named machine shape, written to a fake sysfs and read back, has the right tree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from topology.cpuset import CPUSet
from topology.shapes import GI, SHAPES
from topology.tree import Machine


@dataclass(frozen=True)
class Expect:
    sockets: int
    dies: int
    nodes: int
    cores: int
    online: str
    siblings: tuple[str, ...]  # some cores, as CPU lists
    node_cpus: dict[int, str]
    memory_per_node: int
    l3_groups: int
    distances: dict[tuple[int, int], int]
    memory_only: dict[int, int]  # memory-only node -> closest CPU node
    classes: dict[str, str] = field(default_factory=dict)  # class -> its CPUs; {}: not hybrid
    favoured: str = ""  # CPUs of favoured cores
    tiers: dict[int, str] = field(default_factory=dict)  # memory tier -> its nodes


EXPECTED: dict[str, Expect] = {
    # Interleaved numbering: 4 first threads 0-3, then their siblings 4-7.
    "desktop-1s-4c-ht": Expect(
        1, 1, 1, 4, "0-7", ("0,4", "3,7"), {0: "0-7"}, 32 * GI, 1, {(0, 0): 10}, {}
    ),
    # 40 cores: socket 0 has first threads 0-19, socket 1 20-39, siblings +40.
    "xeon-2s-2numa": Expect(
        2,
        2,
        4,
        40,
        "0-79",
        ("0,40", "9,49", "10,50", "39,79"),
        {0: "0-9,40-49", 1: "10-19,50-59", 2: "20-29,60-69", 3: "30-39,70-79"},
        96 * GI,
        4,
        {(0, 1): 11, (0, 2): 21, (3, 2): 11, (1, 3): 21},
        {},
    ),
    # 128 cores, 16 per node, siblings +128; two CCD L3 caches per node.
    "epyc-2s-nps4": Expect(
        2,
        2,
        8,
        128,
        "0-255",
        ("0,128", "127,255", "64,192"),
        {0: "0-15,128-143", 4: "64-79,192-207", 7: "112-127,240-255"},
        64 * GI,
        16,
        {(0, 3): 12, (0, 4): 32, (7, 4): 12},
        {},
    ),
    "server-4s": Expect(
        4,
        4,
        4,
        96,
        "0-191",
        ("0,96", "95,191"),
        {0: "0-23,96-119", 2: "48-71,144-167"},
        192 * GI,
        4,
        {(0, 3): 21, (1, 2): 21},
        {},
    ),
    # One node per die, 12 cores each.
    "dies-2-per-socket": Expect(
        2,
        4,
        4,
        48,
        "0-95",
        ("0,48", "12,60", "47,95"),
        {0: "0-11,48-59", 1: "12-23,60-71", 3: "36-47,84-95"},
        96 * GI,
        4,
        {(0, 1): 12, (0, 2): 21, (2, 3): 12},
        {},
    ),
    # Adjacent numbering, CPUs 13-15 offline: core 6 keeps only CPU 12, core 7 is gone.
    "isolated-offline": Expect(
        1,
        1,
        2,
        7,
        "0-12",
        ("0-1", "2-3", "10-11", "12"),
        {0: "0-7", 1: "8-12"},
        8 * GI,
        2,
        {(0, 1): 11},
        {},
    ),
    "cxl-memory-only": Expect(
        2,
        2,
        2,
        32,
        "0-63",
        ("0,32", "16,48"),
        {0: "0-15,32-47", 1: "16-31,48-63"},
        128 * GI,
        2,
        {(0, 1): 21, (0, 2): 14, (1, 3): 14, (0, 3): 25},
        {2: 0, 3: 1},
        tiers={4: "0-1", 20: "2-3"},
    ),
    # 8 HT performance cores 0-15 (adjacent), 8 single-thread efficiency cores 16-23;
    # the first two P-cores are favoured.
    "hybrid-desktop": Expect(
        1,
        1,
        1,
        16,
        "0-23",
        ("0-1", "14-15", "16", "23"),
        {0: "0-23"},
        64 * GI,
        1,
        {},
        {},
        classes={"performance": "0-15", "efficiency": "16-23"},
        favoured="0-3",
    ),
    # Ten cores of one kind; cores 0 and 1 (with siblings 10, 11) turbo higher.
    "desktop-favoured": Expect(
        1,
        1,
        1,
        10,
        "0-19",
        ("0,10", "9,19"),
        {0: "0-19"},
        32 * GI,
        1,
        {},
        {},
        favoured="0-1,10-11",
    ),
    # Big cores 0-3, LITTLE 4-7, one thread each.
    "arm-big-little": Expect(
        1,
        1,
        1,
        8,
        "0-7",
        ("0", "7"),
        {0: "0-7"},
        16 * GI,
        1,
        {},
        {},
        classes={"performance": "0-3", "efficiency": "4-7"},
    ),
}


def test_every_shape_has_an_expectation() -> None:
    assert set(EXPECTED) == set(SHAPES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shape_tree(name: str, shape_machine: Callable[[str], Machine]) -> None:
    want = EXPECTED[name]
    machine = shape_machine(name)

    assert len(machine.sockets) == want.sockets
    assert len(list(machine.iter_dies())) == want.dies
    assert len(list(machine.iter_numa_nodes())) == want.nodes
    assert len(list(machine.iter_cores())) == want.cores
    assert str(machine.online) == want.online
    assert str(machine.cpus) == want.online
    assert len(list(machine.iter_l3_groups())) == want.l3_groups

    cores = {str(core.cpus) for core in machine.iter_cores()}
    for siblings in want.siblings:
        assert siblings in cores
    for node_id, cpus in want.node_cpus.items():
        assert str(machine.numa_node(node_id).cpus) == cpus
    for node in machine.iter_numa_nodes():
        assert node.memory_bytes == want.memory_per_node
    for (a, b), distance in want.distances.items():
        assert machine.distance(a, b) == distance
        assert machine.distance(b, a) == distance
    assert {m.id: m.closest_cpu_node for m in machine.memory_only_nodes} == want.memory_only
    classes = {cls: str(machine.class_cpus(cls)) for cls in ("performance", "efficiency")}
    assert {cls: cpus for cls, cpus in classes.items() if cpus} == want.classes
    assert machine.hybrid == bool(want.classes)
    assert str(machine.favoured_cpus) == want.favoured
    assert {t.id: str(CPUSet.of(t.nodes)) for t in machine.memory_tiers} == want.tiers


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_tree_is_nested_and_partitioned(
    name: str, shape_machine: Callable[[str], Machine]
) -> None:
    machine = shape_machine(name)
    seen = CPUSet()
    for socket in machine.sockets:
        assert socket.cpus == CPUSet().union(*(d.cpus for d in socket.dies))
        for die in socket.dies:
            assert die.cpus == CPUSet().union(*(n.cpus for n in die.numa_nodes))
            for node in die.numa_nodes:
                assert node.cpus == CPUSet().union(*(g.cpus for g in node.l3_groups))
                for group in node.l3_groups:
                    assert group.cpus == CPUSet().union(*(c.cpus for c in group.cores))
                    assert group.id == group.cpus.first()
                    for core in group.cores:
                        assert core.id == core.cpus.first()
                        assert core.cpus.isdisjoint(seen)
                        seen |= core.cpus
    assert seen == machine.online
    # Every distance row covers every node, CPU-less ones included.
    all_nodes = {n.id for n in machine.iter_numa_nodes()} | {
        m.id for m in machine.memory_only_nodes
    }
    assert set(machine.distances) == all_nodes
    for row in machine.distances.values():
        assert set(row) == all_nodes
