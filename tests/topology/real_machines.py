"""Sysfs trees of real machines, rebuilt from the facts of public captures.

The captures themselves are not copied here: each builder writes our own small
tree holding the facts read in a public capture (CPU lists, package and core
ids, L3 sharing, capacities, maximum frequencies, node lists and memory), and
says where they come from (repository, path, commit). Facts a capture lacks
are marked as made up where a tree needs them. The expected facts the tests
check (test_real_machines.py) are written from the machine's documentation
and the captures' own expected outputs, not from our reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from topology.cpuset import CPUSet

GHZ = 1_000_000  # cpuinfo_max_freq is in kHz


@dataclass(frozen=True)
class Cpu:
    cpu: int
    package: int
    core_id: int
    siblings: str
    l3: str | None = None
    die: int | None = None  # None: no die_id file (kernels before 5.2)
    max_khz: int | None = None
    capacity: int | None = None


@dataclass(frozen=True)
class Node:
    cpus: str
    distances: tuple[int, ...]
    memory_kib: int


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def write_tree(
    root: Path,
    cpus: list[Cpu],
    nodes: dict[int, Node] | None,
    *,
    core_cpus_list: bool = True,
    pmu: tuple[str, str] | None = None,
) -> Path:
    """The files the agent reads, as the kernel writes them, for these facts."""
    cpu_dir = root / "devices" / "system" / "cpu"
    everything = str(CPUSet.of(c.cpu for c in cpus))
    _put(cpu_dir / "online", everything)
    _put(cpu_dir / "present", everything)
    for c in cpus:
        base = cpu_dir / f"cpu{c.cpu}"
        _put(base / "topology" / "physical_package_id", str(c.package))
        _put(base / "topology" / "core_id", str(c.core_id))
        siblings = "core_cpus_list" if core_cpus_list else "thread_siblings_list"
        _put(base / "topology" / siblings, c.siblings)
        if c.die is not None:
            _put(base / "topology" / "die_id", str(c.die))
        _put(base / "cache" / "index0" / "level", "1")
        if c.l3 is not None:
            _put(base / "cache" / "index3" / "level", "3")
            _put(base / "cache" / "index3" / "shared_cpu_list", c.l3)
        if c.capacity is not None:
            _put(base / "cpu_capacity", str(c.capacity))
        if c.max_khz is not None:
            _put(base / "cpufreq" / "cpuinfo_max_freq", str(c.max_khz))
    if nodes is not None:
        node_dir = root / "devices" / "system" / "node"
        _put(node_dir / "online", str(CPUSet.of(nodes)))
        for node_id, node in nodes.items():
            _put(node_dir / f"node{node_id}" / "cpulist", node.cpus)
            _put(node_dir / f"node{node_id}" / "distance", " ".join(map(str, node.distances)))
            _put(
                node_dir / f"node{node_id}" / "meminfo",
                f"Node {node_id} MemTotal:       {node.memory_kib} kB",
            )
    if pmu is not None:
        _put(root / "devices" / "cpu_core" / "cpus", pmu[0])
        _put(root / "devices" / "cpu_atom" / "cpus", pmu[1])
    return root


# -- Intel Core i7-1370P (Raptor Lake: 6 HT P-cores, 8 E-cores) -----------------------
# Source: open-mpi/hwloc, tests/hwloc/linux/20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2,
# commit eda8f6379d4801b8e359b978bfa5051e6c070cd9 ("add a RaptorLake hybrid test").
# The capture has no /sys/devices/cpu_core or cpu_atom (hwloc-gather-topology does not
# save them); the PMU lists below are what the kernel lists for those kinds of core,
# taken from the same test's expected output (cores P#0-20 one kind, P#24-31 another).


def i7_1370p(root: Path, *, with_pmu: bool) -> Path:
    cpus = []
    for k in range(6):  # P-cores: CPUs 2k, 2k+1; core_id 4k; cores 2 and 4 turbo to 5.2 GHz
        khz = 52 * GHZ // 10 if k in (2, 4) else 5 * GHZ
        for cpu in (2 * k, 2 * k + 1):
            cpus.append(Cpu(cpu, 0, 4 * k, f"{2 * k}-{2 * k + 1}", "0-19", 0, khz))
    for cpu in range(12, 20):  # E-cores: one thread each, core_id 24..31, 3.9 GHz
        cpus.append(Cpu(cpu, 0, cpu + 12, str(cpu), "0-19", 0, 39 * GHZ // 10))
    nodes = {0: Node("0-19", (10,), 32489480)}
    return write_tree(root, cpus, nodes, pmu=("0-11", "12-19") if with_pmu else None)


# -- NVIDIA DGX Spark, GB10 (10 Cortex-X925 + 10 Cortex-A725) ------------------------------
# Source: open-mpi/hwloc, tests/hwloc/linux/nvidia-dgx-gb10.tar.bz2,
# commit 09218c8315dfe14883c3249186cc69736ca9718e.
GB10_CAPACITY = [718] * 5 + [997] * 5 + [731] * 5 + [1017] * 4 + [1024]
GB10_KHZ = ([2808000] * 5 + [3900000] * 5) * 2


def gb10(root: Path) -> Path:
    cpus = [
        Cpu(c, 36, c, str(c), "0-9" if c < 10 else "10-19", None, GB10_KHZ[c], GB10_CAPACITY[c])
        for c in range(20)
    ]
    return write_tree(root, cpus, {0: Node("0-19", (10,), 125508468)})


# -- A phone SoC: 3 Cortex-A510, 4 Cortex-A710/A715, 1 Cortex-X3 ---------------------------
# Source: util-linux/util-linux, tests/ts/lscpu/dumps/arm-A510-A710-A715-X3.tar.gz,
# commit a596a441ac6ef90d5fdfa14830d5c3c88885e4ec. No node/ directory (CONFIG_NUMA=n),
# and the clusters are packages 0, 1, 2; no /proc/meminfo in the dump.
PHONE = [  # cpu, package, core_id, capacity, max kHz
    (0, 0, 0, 280, 2016000),
    (1, 0, 1, 280, 2016000),
    (2, 0, 2, 280, 2016000),
    (3, 1, 0, 855, 2803200),
    (4, 1, 1, 855, 2803200),
    (5, 1, 2, 855, 2803200),
    (6, 1, 3, 855, 2803200),
    (7, 2, 0, 1024, 3187200),
]


def phone_a510_x3(root: Path) -> Path:
    cpus = [Cpu(c, p, i, str(c), "0-7", None, khz, cap) for c, p, i, cap, khz in PHONE]
    return write_tree(root, cpus, None)


# -- AMD EPYC 7451, two sockets (Naples: 4 dies per socket, one NUMA node each) ------------
# Source: util-linux/util-linux, tests/ts/lscpu/dumps/x86_64-epyc_7451.tar.gz,
# commit b24c7d585d2d09fec72dde72111522c54cb425c5. An old kernel: thread_siblings_list,
# no die_id. Node CPU lists from node*/cpumap; the dump has no node distances or
# meminfo: the distances (10/16/32) and 32 GiB per node below are made up.
EPYC_CORE_IDS = [
    0,
    1,
    2,
    4,
    5,
    6,
    8,
    9,
    10,
    12,
    13,
    14,
    16,
    17,
    18,
    20,
    21,
    22,
    24,
    25,
    26,
    28,
    29,
    30,
]


def epyc_7451(root: Path) -> Path:
    cpus = []
    for first in range(48):
        l3_first = first // 3 * 3
        l3 = f"{l3_first}-{l3_first + 2},{l3_first + 48}-{l3_first + 50}"
        for cpu in (first, first + 48):
            cpus.append(
                Cpu(
                    cpu,
                    first // 24,
                    EPYC_CORE_IDS[first % 24],
                    f"{first},{first + 48}",
                    l3,
                    None,
                    2300000,
                )
            )

    def distance(a: int, b: int) -> int:
        return 10 if a == b else 16 if a // 4 == b // 4 else 32

    nodes = {
        n: Node(
            f"{6 * n}-{6 * n + 5},{6 * n + 48}-{6 * n + 53}",
            tuple(distance(n, m) for m in range(8)),
            32 * 1024 * 1024,
        )
        for n in range(8)
    }
    return write_tree(root, cpus, nodes, core_cpus_list=False)


# -- Intel Xeon E7-4870, four sockets, no Hyper-Threading ---------------------------------
# Source: open-mpi/hwloc, tests/hwloc/linux/40intel64-4n10c+pci-conflicts.tar.bz2,
# commit 245a239aa8466207ea477b660bc9dd949e97f94f. CPU c is on package c % 4 (and node
# c % 4); no cpufreq in the capture.
XEON_CORE_IDS = [0, 1, 2, 8, 9, 16, 17, 18, 24, 25]
XEON_MEMORY_KIB = [134204252, 134217728, 134217728, 134217728]


def xeon_e7_4870(root: Path) -> Path:
    cpus = []
    for cpu in range(40):
        node = cpu % 4
        l3 = ",".join(str(c) for c in range(node, 40, 4))
        cpus.append(Cpu(cpu, node, XEON_CORE_IDS[cpu // 4], str(cpu), l3))
    nodes = {
        n: Node(
            ",".join(str(c) for c in range(n, 40, 4)),
            tuple(10 if n == m else 20 for m in range(4)),
            XEON_MEMORY_KIB[n],
        )
        for n in range(4)
    }
    return write_tree(root, cpus, nodes, core_cpus_list=False)


CAPTURES = Path(__file__).parent / "captures"

# name -> a function writing the machine's tree under the given root (returns the root)
MACHINES: dict[str, Callable[[Path], Path]] = {
    "i7-1370p": lambda root: i7_1370p(root, with_pmu=True),
    "i7-1370p-without-pmu": lambda root: i7_1370p(root, with_pmu=False),
    "gb10": gb10,
    "phone-a510-x3": phone_a510_x3,
    "epyc-7451-2s": epyc_7451,
    "xeon-e7-4870-4s": xeon_e7_4870,
    # This machine's own capture (numa-agent topology --capture), committed as files.
    "firecracker-2cpu-epyc": lambda _root: CAPTURES / "firecracker-2cpu-epyc",
}
