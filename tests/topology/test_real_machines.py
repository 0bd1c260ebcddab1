"""The topology reader on real machines: trees rebuilt from public captures
(real_machines.py says where each fact comes from) and this machine's own capture.

The expected facts are written from what each machine is (its documentation and
the captures' own expected outputs), not from what the reader says: a hybrid part
gets classes from cpu_core/cpu_atom or cpu_capacity, a part whose best cores only
turbo higher gets favoured cores and no classes, servers get neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from topology.capture import capture
from topology.cpuset import CPUSet
from topology.sysfs import read_machine

from .real_machines import MACHINES

GIB = 1024**3


@dataclass(frozen=True)
class Facts:
    sockets: int
    nodes: int
    cores: int
    online: str
    l3_groups: int
    classes: dict[str, str] = field(default_factory=dict)  # {}: one kind of core
    favoured: str = ""
    smt: bool = False
    memory: dict[int, int] = field(default_factory=dict)  # node -> bytes (those checked)
    tiers: dict[int, str] = field(default_factory=dict)


EXPECTED: dict[str, Facts] = {
    # Raptor Lake i7-1370P: 6 P-cores with Hyper-Threading (CPUs 0-11), 8 E-cores
    # (12-19); Turbo Boost Max 3.0 lets two P-cores (4-5, 8-9) reach 5.2 GHz, not 5.0.
    "i7-1370p": Facts(
        1,
        1,
        14,
        "0-19",
        1,
        {"performance": "0-11", "efficiency": "12-19"},
        "4-5,8-9",
        smt=True,
        memory={0: 32489480 * 1024},
    ),
    # The same part as hwloc captured it, without cpu_core/cpu_atom: frequency alone
    # never makes a class, however far apart; the fastest cores are favoured.
    "i7-1370p-without-pmu": Facts(1, 1, 14, "0-19", 1, {}, "4-5,8-9", smt=True),
    # GB10: two clusters (L3 0-9 and 10-19), each 5 Cortex-A725 then 5 Cortex-X925.
    "gb10": Facts(
        1,
        1,
        20,
        "0-19",
        2,
        {"performance": "5-9,15-19", "efficiency": "0-4,10-14"},
        "",
        memory={0: 125508468 * 1024},
    ),
    # 3 LITTLE A510 (0-2), 4 big A710/A715 (3-6), one prime X3 (7) that clocks highest.
    # One NUMA node over three cluster "packages": one socket; no memory size in the dump.
    "phone-a510-x3": Facts(
        1, 1, 8, "0-7", 1, {"performance": "3-7", "efficiency": "0-2"}, "7", memory={0: 0}
    ),
    # 2 x 24 cores with SMT, 4 NUMA nodes per socket, an L3 per 3-core CCX.
    "epyc-7451-2s": Facts(2, 8, 48, "0-95", 16, smt=True),
    # 4 x 10 cores, no SMT, one node and one L3 per socket.
    "xeon-e7-4870-4s": Facts(4, 4, 40, "0-39", 4, memory={0: 134204252 * 1024, 3: 128 * GIB}),
    # This VM (2 vCPUs of an EPYC host, one node, Linux 6.18 with memory tiering).
    "firecracker-2cpu-epyc": Facts(1, 1, 2, "0-1", 1, tiers={4: "0"}),
}


def test_every_machine_has_its_facts() -> None:
    assert set(EXPECTED) == set(MACHINES)


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_real_machine(name: str, tmp_path: Path) -> None:
    root = MACHINES[name](tmp_path / "sys")
    want = EXPECTED[name]
    machine = read_machine(root, cpu_info=False)
    cores = list(machine.iter_cores())
    assert len(machine.sockets) == want.sockets
    assert len(list(machine.iter_numa_nodes())) == want.nodes
    assert len(cores) == want.cores
    assert str(machine.online) == want.online
    assert len(list(machine.iter_l3_groups())) == want.l3_groups
    assert any(len(core.cpus) > 1 for core in cores) == want.smt
    classes = {cls: str(machine.class_cpus(cls)) for cls in ("performance", "efficiency")}
    assert {cls: cpus for cls, cpus in classes.items() if cpus} == want.classes
    assert machine.hybrid == bool(want.classes)
    assert str(machine.favoured_cpus) == want.favoured
    for node_id, size in want.memory.items():
        assert machine.numa_node(node_id).memory_bytes == size
    assert {t.id: str(CPUSet.of(t.nodes)) for t in machine.memory_tiers} == want.tiers
    # A capture of it reads back as the same machine.
    capture(root, tmp_path / "cap")
    assert read_machine(tmp_path / "cap", cpu_info=False) == machine
