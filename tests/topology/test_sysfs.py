"""The sysfs reader on fake trees: errors name the file, odd machines read right."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from devtools.fakesysfs import write_sysfs
from topology.cpuset import CPUSet
from topology.shapes import EFFICIENCY_CAPACITY, PERFORMANCE_CAPACITY, HybridSignal, MachineSpec
from topology.sysfs import SysfsError, read_machine
from topology.tree import Machine

# Two NUMA nodes of 2 cores x 2 threads, interleaved: node0 = 0,1,4,5 (cores 0,4 and 1,5),
# node1 = 2,3,6,7 (cores 2,6 and 3,7).
TWO_NODES = MachineSpec(numa_per_die=2, cores_per_numa=2)


def _set(root: Path, rel: str, text: str) -> None:
    (root / rel).write_text(text + "\n")


BROKEN: list[tuple[str, str, str, str]] = [
    # (file to overwrite, its new content, file the error must name, what it must say)
    ("node/node1/cpulist", "0,2-3,6-7", "node/node1/cpulist", "CPU 0 is also in node0"),
    ("node/node0/distance", "10 11 21", "node/node0/distance", "3 distances for 2 nodes"),
    ("node/node1/distance", "11 ten", "node/node1/distance", "expected integers"),
    ("node/node0/cpulist", "0-a", "node/node0/cpulist", "not a CPU list"),
    ("cpu/online", "0-7,", "cpu/online", "not a CPU list"),
    ("cpu/online", "", "cpu/online", "no online CPUs"),
    ("cpu/offline", "3", "cpu/offline", "CPUs 3 are also in"),
    (
        "cpu/cpu3/topology/physical_package_id",
        "zero",
        "cpu/cpu3/topology/physical_package_id",
        "'zero'",
    ),
    ("node/node1/meminfo", "Node 1 MemFree: 5 kB", "node/node1/meminfo", "MemTotal"),
    ("cpu/cpu4/topology/core_cpus_list", "4", "cpu/cpu4/topology/core_cpus_list", "lists 4"),
    ("cpu/cpu1/topology/core_cpus_list", "0,4", "cpu/cpu1/topology/core_cpus_list", "CPU 1 itself"),
    ("cpu/cpu2/cache/index3/level", "three", "cpu/cpu2/cache/index3/level", "expected an integer"),
    ("node/node0/cpulist", "0,4", "node", "online CPUs 1,5 are in no node"),
    ("node/online", "0-2", "node/online", "nodes [2] are online but have no directory"),
]


@pytest.mark.parametrize(("rel", "text", "named", "says"), BROKEN)
def test_broken_tree_error_names_the_file(
    rel: str, text: str, named: str, says: str, spec_root: Callable[[MachineSpec], Path]
) -> None:
    root = spec_root(TWO_NODES)
    system = root / "devices" / "system"
    _set(system, rel, text)
    with pytest.raises(SysfsError) as info:
        read_machine(root)
    message = str(info.value)
    assert str(system / named) in message
    assert says in message


def test_core_spanning_two_nodes_is_an_error(spec_root: Callable[[MachineSpec], Path]) -> None:
    root = spec_root(TWO_NODES)
    node = root / "devices/system/node"
    _set(node, "node0/cpulist", "0-1,4")
    _set(node, "node1/cpulist", "2-3,5-7")
    with pytest.raises(SysfsError, match=r"cpu1/topology/core_cpus_list: core 1,5 spans"):
        read_machine(root)


@pytest.mark.parametrize(
    ("remove", "named"),
    [
        ("cpu/cpu5/topology", "cpu/cpu5/topology: missing"),
        ("node/node0/meminfo", "node/node0/meminfo: cannot read"),
        ("cpu", "cpu: missing"),
    ],
)
def test_missing_files_are_named(
    remove: str, named: str, spec_root: Callable[[MachineSpec], Path]
) -> None:
    root = spec_root(TWO_NODES)
    target = root / "devices/system" / remove
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    with pytest.raises(SysfsError, match=str(root / "devices/system" / named)):
        read_machine(root)


def test_offline_and_isolated(shape_machine: Callable[[str], Machine]) -> None:
    machine = shape_machine("isolated-offline")
    assert str(machine.offline) == "13-15"
    assert str(machine.isolated) == "2-5"
    assert str(machine.present) == "0-15"
    assert str(machine.online) == "0-12"
    # Isolated CPUs are in the tree (the policy decides what to do with them);
    # offline ones are known but nowhere in it.
    in_tree = CPUSet().union(*(core.cpus for core in machine.iter_cores()))
    assert machine.isolated.is_subset(in_tree)
    assert in_tree.isdisjoint(machine.offline)


def test_node_with_only_offline_cpus_becomes_memory_only(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    spec = MachineSpec(
        numa_per_die=2, cores_per_numa=1, numbering="adjacent", offline=CPUSet.parse("2-3")
    )
    machine = read_machine(spec_root(spec))
    assert [n.id for n in machine.iter_numa_nodes()] == [0]
    assert [(m.id, m.closest_cpu_node) for m in machine.memory_only_nodes] == [(1, 0)]


@pytest.mark.parametrize(
    ("row", "closest"),
    [
        ((30, 25, 17, 10), 2),
        ((30, 17, 17, 10), 1),  # a tie goes to the lowest node id
        ((12, 17, 17, 10), 0),
    ],
)
def test_memory_only_node_attaches_to_closest_cpu_node(
    row: tuple[int, ...], closest: int, spec_root: Callable[[MachineSpec], Path]
) -> None:
    distances = ((10, 20, 20, row[0]), (20, 10, 20, row[1]), (20, 20, 10, row[2]), row)
    spec = MachineSpec(
        numa_per_die=3,
        cores_per_numa=1,
        threads_per_core=1,
        memory_only_nodes=1,
        memory_per_memory_only_node=1024**3,
        distances=distances,
    )
    machine = read_machine(spec_root(spec))
    (memory,) = machine.memory_only_nodes
    assert (memory.id, memory.memory_bytes, memory.closest_cpu_node) == (3, 1024**3, closest)
    assert machine.memory_nodes_for(closest) == (closest, 3)
    assert machine.distance(3, 0) == row[0]


def test_cpu_less_node_without_memory_is_dropped(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    spec = MachineSpec(cores_per_numa=1, memory_only_nodes=1, memory_per_memory_only_node=0)
    machine = read_machine(spec_root(spec))
    assert machine.memory_only_nodes == ()
    assert [n.id for n in machine.iter_numa_nodes()] == [0]


# What the kernel says about four single-thread cores (CPUs 0-3), and what that makes them.
# Written file by file here, not by the fake writer: the expected facts are independent of it.
GHZ = 1_000_000  # cpuinfo_max_freq is in kHz
KINDS: list[tuple[str, dict[str, str], dict[str, str], str]] = [
    # (case, files under the root, expected class -> CPUs, expected favoured CPUs)
    (
        "intel hybrid: cpu_core and cpu_atom",
        {"devices/cpu_core/cpus": "0-1", "devices/cpu_atom/cpus": "2-3"},
        {"performance": "0-1", "efficiency": "2-3"},
        "",
    ),
    (
        "intel hybrid with a favoured P-core",
        {
            "devices/cpu_core/cpus": "0-1",
            "devices/cpu_atom/cpus": "2-3",
            **{f"cpu{c}/cpufreq/cpuinfo_max_freq": str(k) for c, k in enumerate([54, 52, 39, 39])},
        },
        {"performance": "0-1", "efficiency": "2-3"},
        "0",
    ),
    # E-cores switched off in the firmware: the PMU lists only cpu_core.
    ("intel, cpu_core only", {"devices/cpu_core/cpus": "0-3"}, {}, ""),
    (
        "arm big.LITTLE by cpu_capacity",
        {f"cpu{c}/cpu_capacity": str(k) for c, k in enumerate([1024, 1024, 446, 446])},
        {"performance": "0-1", "efficiency": "2-3"},
        "",
    ),
    (
        "capacities a few percent apart: one kind, favoured by capacity",
        {f"cpu{c}/cpu_capacity": str(k) for c, k in enumerate([1024, 1000, 1000, 1000])},
        {},
        "0",
    ),
    (
        "turbo boost max 3.0: 200 MHz more on two cores",
        {f"cpu{c}/cpufreq/cpuinfo_max_freq": str(k) for c, k in enumerate([53, 53, 51, 51])},
        {},
        "0-1",
    ),
    # Frequency alone never makes a class, however far apart (a hybrid part on a
    # kernel too old for cpu_core/cpu_atom shows as favoured cores only).
    (
        "frequency alone, far apart",
        {f"cpu{c}/cpufreq/cpuinfo_max_freq": str(k) for c, k in enumerate([52, 52, 39, 39])},
        {},
        "0-1",
    ),
    ("nothing said", {}, {}, ""),
]


@pytest.mark.parametrize(
    ("files", "classes", "favoured"),
    [pytest.param(f, c, v, id=name) for name, f, c, v in KINDS],
)
def test_core_kinds_come_from_what_the_kernel_says(
    files: dict[str, str],
    classes: dict[str, str],
    favoured: str,
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    root = spec_root(MachineSpec(cores_per_numa=4, threads_per_core=1))
    for rel, text in files.items():
        path = root / (rel if rel.startswith("devices/") else f"devices/system/cpu/{rel}")
        path.parent.mkdir(parents=True, exist_ok=True)
        number = int(text) * GHZ // 10 if "cpufreq" in rel else None
        path.write_text(f"{number if number is not None else text}\n")
    machine = read_machine(root)
    got = {cls: str(machine.class_cpus(cls)) for cls in ("performance", "efficiency")}
    assert {cls: cpus for cls, cpus in got.items() if cpus} == classes
    assert machine.hybrid == bool(classes)
    assert str(machine.favoured_cpus) == favoured


def test_a_cpu_in_neither_pmu_list_is_an_error(spec_root: Callable[[MachineSpec], Path]) -> None:
    root = spec_root(MachineSpec(cores_per_numa=4, threads_per_core=1))
    for name, cpus in (("cpu_core", "0-1"), ("cpu_atom", "2")):
        (root / "devices" / name).mkdir(parents=True)
        (root / "devices" / name / "cpus").write_text(cpus + "\n")
    with pytest.raises(SysfsError, match=r"devices/cpu_core/cpus: CPU 3 is in neither"):
        read_machine(root)


@pytest.mark.parametrize("signal", ["pmu", "capacity"])
def test_hybrid_descriptions_have_classes(
    signal: HybridSignal, spec_root: Callable[[MachineSpec], Path]
) -> None:
    spec = MachineSpec(
        cores_per_numa=6, efficiency_cores_per_numa=4, numbering="adjacent", hybrid_signal=signal
    )
    machine = read_machine(spec_root(spec))
    classes = {str(c.cpus): (c.cpu_class, c.capacity) for c in machine.iter_cores()}
    big, small = (
        (PERFORMANCE_CAPACITY, EFFICIENCY_CAPACITY) if signal == "capacity" else (None, None)
    )
    assert classes == {
        "0-1": ("performance", big),
        "2-3": ("performance", big),
        "4": ("efficiency", small),
        "5": ("efficiency", small),
        "6": ("efficiency", small),
        "7": ("efficiency", small),
    }


def test_uniform_capacity_is_not_hybrid(spec_root: Callable[[MachineSpec], Path]) -> None:
    root = spec_root(MachineSpec(cores_per_numa=2))
    for cpu in range(4):
        _set(root, f"devices/system/cpu/cpu{cpu}/cpu_capacity", "1024")
    machine = read_machine(root)
    assert {(c.cpu_class, c.capacity) for c in machine.iter_cores()} == {(None, 1024)}


def test_no_capacity_information(shape_machine: Callable[[str], Machine]) -> None:
    machine = shape_machine("xeon-2s-2numa")
    assert {(c.cpu_class, c.capacity) for c in machine.iter_cores()} == {(None, None)}


@pytest.mark.parametrize("meminfo", [None, "MemTotal:        1000 kB\nMemFree: 10 kB\n"])
def test_machine_without_node_directory(meminfo: str | None, tmp_path: Path) -> None:
    spec = MachineSpec(cores_per_numa=2, write_node_dir=False)
    root = write_sysfs(spec, tmp_path / "sys")
    if meminfo is not None:
        (tmp_path / "proc").mkdir()
        (tmp_path / "proc" / "meminfo").write_text(meminfo)
    machine = read_machine(root)
    (node,) = machine.iter_numa_nodes()
    assert (node.id, str(node.cpus)) == (0, "0-3")
    assert node.memory_bytes == (1000 * 1024 if meminfo else 0)
    assert machine.distances == {0: {0: 10}}


def test_no_l3_information_gives_one_group_per_node(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    machine = read_machine(spec_root(MachineSpec(numa_per_die=2, cores_per_numa=3, l3_per_numa=0)))
    groups = {n.id: [str(g.cpus) for g in n.l3_groups] for n in machine.iter_numa_nodes()}
    assert groups == {0: ["0-2,6-8"], 1: ["3-5,9-11"]}


def test_l3_shared_across_nodes_is_cut_at_the_node(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    # Sub-NUMA clustering: one L3 for the socket, two nodes in it.
    root = spec_root(MachineSpec(numa_per_die=2, cores_per_numa=2, threads_per_core=1))
    for cpu in range(4):
        _set(root, f"devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list", "0-3")
    machine = read_machine(root)
    groups = {n.id: [str(g.cpus) for g in n.l3_groups] for n in machine.iter_numa_nodes()}
    assert groups == {0: ["0-1"], 1: ["2-3"]}


def test_several_l3_groups_per_node_are_sorted_by_lowest_cpu(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    spec = MachineSpec(cores_per_numa=5, l3_per_numa=2, numbering="adjacent")
    machine = read_machine(spec_root(spec))
    (node,) = machine.iter_numa_nodes()
    # 5 cores split 3 + 2: cores 0-2 (CPUs 0-5) and 3-4 (CPUs 6-9).
    assert [(g.id, str(g.cpus), len(g.cores)) for g in node.l3_groups] == [
        (0, "0-5", 3),
        (6, "6-9", 2),
    ]


def test_without_die_id_each_socket_has_one_die(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    spec = MachineSpec(sockets=2, dies_per_socket=2, cores_per_numa=1, write_die_id=False)
    machine = read_machine(spec_root(spec))
    assert [(s.id, [d.id for d in s.dies]) for s in machine.sockets] == [(0, [0]), (1, [0])]
    assert [[n.id for n in s.numa_nodes] for s in machine.sockets] == [[0, 1], [2, 3]]


def test_node_spanning_sockets_joins_them(spec_root: Callable[[MachineSpec], Path]) -> None:
    # A VM with 2 sockets and no NUMA: the one node cannot nest in either socket.
    spec = MachineSpec(sockets=2, cores_per_numa=2, threads_per_core=1, write_node_dir=False)
    machine = read_machine(spec_root(spec))
    assert [(s.id, str(s.cpus), len(s.dies)) for s in machine.sockets] == [(0, "0-3", 1)]


def test_kernel_without_core_cpus_list_uses_thread_siblings(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    root = spec_root(MachineSpec(cores_per_numa=2))
    for path in root.glob("devices/system/cpu/cpu*/topology/core_cpus_list"):
        path.unlink()
    machine = read_machine(root)
    assert [str(c.cpus) for c in machine.iter_cores()] == ["0,2", "1,3"]


def test_fake_roots_never_ask_cpuinfo(shape_machine: Callable[[str], Machine]) -> None:
    machine = shape_machine("desktop-1s-4c-ht")
    assert (machine.cpu_model, machine.cpu_flags) == ("", ())
