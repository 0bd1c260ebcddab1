"""Fake sysfs trees written from a compact machine description (development tool).

`write_sysfs` writes the files the kernel has under /sys/devices/system/{cpu,node}
(plus network interfaces under /sys/class/net and the firmware's DMI strings
under /sys/class/dmi/id) so that tests run the real reader on machines that are
not here (multi-socket Xeon, EPYC NPS4, CXL memory, hybrid desktops, VMs). The
descriptions and named shapes themselves are product data (`topology.shapes`).
"""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict
from pathlib import Path

from agent.scratch import FAST_TMP
from topology.cpuset import CPUSet
from topology.shapes import (
    DmiSpec,
    MachineSpec,
    core_speed,
    cpu_layout,
    distance_matrix,
    l3_chunks,
    memory_tiers,
    pmu_cpus,
    shape_spec,
)

# Tests put their trees where the product puts its scratch files.
__all__ = ["FAST_TMP", "write_shape", "write_sysfs"]


# -- writing ------------------------------------------------------------------


def _cpumask(cpus: CPUSet) -> str:
    """The kernel's hex bitmap format: 32-bit words, most significant first."""
    words: list[str] = []
    mask = cpus.mask
    while True:
        words.append(f"{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
        if not mask:
            break
    return ",".join(reversed(words))


class _Writer:
    """Writes sysfs-style files (text plus newline), creating each directory once."""

    def __init__(self) -> None:
        self._made: set[Path] = set()

    def __call__(self, path: Path, text: str) -> None:
        parent = path.parent
        if parent not in self._made:
            parent.mkdir(parents=True, exist_ok=True)
            self._made.add(parent)
        with open(path, "w") as out:
            out.write(text + "\n")


def _meminfo(node: int, memory: int) -> str:
    kb = memory // 1024
    return (
        f"Node {node} MemTotal:       {kb:>8} kB\n"
        f"Node {node} MemFree:        {kb:>8} kB\n"
        f"Node {node} MemUsed:        {0:>8} kB"
    )


def _symlink(link: Path, target: Path) -> None:
    """A relative symlink, as sysfs has them (class/net/eth0/device -> ../../../devices/...);
    replaced when the tree is written again over itself, as its files are."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def _write_nics(spec: MachineSpec, root: Path, write: _Writer) -> None:
    """class/net/<if>, with a `device` link to its PCI function (which has numa_node)
    for the spec's NICs and none for virtual ones.

    The kernel puts the interface's directory inside its PCI function, so the
    `device` link closes a cycle; here it does not, so a fake tree can be copied
    with `shutil.copytree` or `cp -rL`.
    """
    pci = root / "devices" / "pci0000:00"
    for index, (name, node) in enumerate(spec.nics):
        function = pci / f"0000:{0x18 + index:02x}:00.0"
        write(function / "numa_node", str(node))
        write(function / "class", "0x020000")  # Ethernet controller
        netdev = root / "class" / "net" / name
        write(netdev / "type", "1")
        _symlink(netdev / "device", function)
    for name in spec.virtual_nics:
        write(root / "class" / "net" / name / "type", "772" if name == "lo" else "1")


def _write_dmi(dmi: DmiSpec, root: Path, write: _Writer) -> None:
    ident = root / "devices" / "virtual" / "dmi" / "id"
    for field in dataclasses.fields(DmiSpec):
        text = getattr(dmi, field.name)
        if text:
            write(ident / field.name, text)
    ident.mkdir(parents=True, exist_ok=True)
    _symlink(root / "class" / "dmi" / "id", ident)


def write_sysfs(spec: MachineSpec, root: Path) -> Path:
    """Write the sysfs files of `spec` under `root` (a stand-in for /sys); returns root."""
    root = Path(root)
    cpu_dir = root / "devices" / "system" / "cpu"
    node_dir = root / "devices" / "system" / "node"
    layout = cpu_layout(spec)
    _write = _Writer()
    everything = CPUSet.range(0, spec.cpu_count - 1)
    online = everything - spec.offline

    # Sharing sets (online CPUs only, as the kernel keeps them) by grouping key.
    packages: dict[int, CPUSet] = defaultdict(CPUSet)
    dies: dict[tuple[int, int], CPUSet] = defaultdict(CPUSet)
    numa: dict[int, CPUSet] = defaultdict(CPUSet)
    l3s: dict[tuple[int, int], CPUSet] = defaultdict(CPUSet)
    l3_of_index = {index: group for group, chunk in enumerate(l3_chunks(spec)) for index in chunk}
    for core in layout:
        cpus = CPUSet.of(core.cpus) & online
        packages[core.socket] |= cpus
        dies[core.socket, core.die] |= cpus
        numa[core.numa] |= cpus
        l3s[core.numa, l3_of_index.get(core.index, 0)] |= cpus

    _write(cpu_dir / "online", str(online))
    _write(cpu_dir / "offline", str(spec.offline))
    _write(cpu_dir / "present", str(everything))
    _write(cpu_dir / "possible", str(everything))
    _write(cpu_dir / "isolated", str(spec.isolated))
    _write(cpu_dir / "kernel_max", "8191")

    for core in layout:
        core_cpus = CPUSet.of(core.cpus) & online
        package = packages[core.socket]
        die = dies[core.socket, core.die]
        l3 = l3s[core.numa, l3_of_index.get(core.index, 0)]
        for cpu in core.cpus:
            base = cpu_dir / f"cpu{cpu}"
            if cpu != 0:  # the boot CPU has no online file on most machines
                _write(base / "online", "0" if cpu in spec.offline else "1")
            capacity, max_khz = core_speed(spec, core)
            if capacity is not None:
                _write(base / "cpu_capacity", str(capacity))
            if max_khz is not None:
                _write(base / "cpufreq" / "cpuinfo_max_freq", str(max_khz))
            if cpu in spec.offline:
                # The kernel removes topology/ and cache/ of an offline CPU.
                continue
            topo = base / "topology"
            _write(topo / "physical_package_id", str(core.socket))
            if spec.write_die_id:
                _write(topo / "die_id", str(core.die))
                _write(topo / "die_cpus_list", str(die))
            _write(topo / "core_id", str(core.index))
            _write(topo / "core_cpus_list", str(core_cpus))
            _write(topo / "core_cpus", _cpumask(core_cpus))
            _write(topo / "thread_siblings_list", str(core_cpus))
            _write(topo / "thread_siblings", _cpumask(core_cpus))
            _write(topo / "core_siblings_list", str(package))
            _write(topo / "package_cpus_list", str(package))
            caches: list[tuple[int, str, CPUSet]] = [
                (1, "Data", core_cpus),
                (1, "Instruction", core_cpus),
                (2, "Unified", core_cpus),
            ]
            if spec.l3_per_numa:
                caches.append((3, "Unified", l3))
            for i, (level, kind, shared) in enumerate(caches):
                index = base / "cache" / f"index{i}"
                _write(index / "level", str(level))
                _write(index / "type", kind)
                _write(index / "shared_cpu_list", str(shared))

    for tier in memory_tiers(spec):
        text = str(CPUSet.of(tier.nodes))
        _write(
            root / "devices" / "virtual" / "memory_tiering" / f"memory_tier{tier.id}" / "nodelist",
            text,
        )
    pmu = pmu_cpus(spec)
    if pmu is not None:
        _write(root / "devices" / "cpu_core" / "cpus", str(pmu[0]))
        _write(root / "devices" / "cpu_atom" / "cpus", str(pmu[1]))
    _write_nics(spec, root, _write)
    if spec.dmi is not None:
        _write_dmi(spec.dmi, root, _write)
    if not spec.write_node_dir:
        return root
    matrix = distance_matrix(spec)
    nodes = CPUSet.range(0, spec.node_count - 1)
    cpu_nodes = CPUSet.range(0, spec.cpu_node_count - 1)
    _write(node_dir / "online", str(nodes))
    _write(node_dir / "possible", str(nodes))
    _write(node_dir / "has_cpu", str(cpu_nodes))
    _write(node_dir / "has_memory", str(nodes))
    _write(node_dir / "has_normal_memory", str(cpu_nodes))
    for node in range(spec.node_count):
        node_base = node_dir / f"node{node}"
        if node < spec.cpu_node_count:
            cpus = numa[node]
            memory = spec.memory_per_numa
        else:
            cpus = CPUSet()
            memory = spec.memory_per_memory_only_node
        _write(node_base / "cpulist", str(cpus))
        _write(node_base / "cpumap", _cpumask(cpus))
        _write(node_base / "meminfo", _meminfo(node, memory))
        _write(node_base / "distance", " ".join(str(d) for d in matrix[node]))
    return root


def write_shape(name: str, root: Path) -> Path:
    """Write the named shape (`topology.shapes.SHAPES`) under `root`.

    KeyError names the known shapes.
    """
    return write_sysfs(shape_spec(name), root)
