"""The machine tree as JSON-ready data and as text for a person.

Pure functions over `Machine`: the `topology` command prints them, tests
compare them; lists are ordered by id (cores and L3 groups by lowest CPU).
`machine_to_json` is the topology proper (the state file's fingerprint hashes
it); `topology_json` adds what may change without the topology changing: NICs
and each NUMA node's labels (computed above this package and passed in).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topology.cpuset import CPUSet
from topology.tree import Machine, NumaNode

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
# Keys of topology_json beyond machine_to_json (besides each NUMA node's labels).
DISPLAY_ONLY = ("nics", "favoured_cpus", "memory_tiers")


def _node_json(node: NumaNode) -> dict[str, Any]:
    cores = sorted(node.cores, key=lambda c: c.id)
    out: dict[str, Any] = {
        "id": node.id,
        "cpus": str(node.cpus),
        "memory_bytes": node.memory_bytes,
        "l3_groups": [str(g.cpus) for g in sorted(node.l3_groups, key=lambda g: g.id)],
        "cores": [str(c.cpus) for c in cores],
    }
    classes: dict[str, list[int]] = {}
    for core in cores:
        if core.cpu_class is not None:
            classes.setdefault(core.cpu_class, []).extend(core.cpus)
    if classes:
        out["cpu_classes"] = {name: str(CPUSet.of(ids)) for name, ids in sorted(classes.items())}
    return out


def machine_to_json(machine: Machine) -> dict[str, Any]:
    """The documented JSON shape of the `topology --json` command."""
    out: dict[str, Any] = {
        "online": str(machine.online),
        "offline": str(machine.offline),
        "isolated": str(machine.isolated),
        "present": str(machine.present),
        "sockets": [
            {
                "id": socket.id,
                "cpus": str(socket.cpus),
                "dies": [
                    {
                        "id": die.id,
                        "cpus": str(die.cpus),
                        "numa_nodes": [
                            _node_json(n) for n in sorted(die.numa_nodes, key=lambda n: n.id)
                        ],
                    }
                    for die in sorted(socket.dies, key=lambda d: d.id)
                ],
            }
            for socket in sorted(machine.sockets, key=lambda s: s.id)
        ],
        "memory_only_nodes": [
            {"id": m.id, "memory_bytes": m.memory_bytes, "closest_cpu_node": m.closest_cpu_node}
            for m in sorted(machine.memory_only_nodes, key=lambda m: m.id)
        ],
        "distances": {
            str(a): {str(b): d for b, d in sorted(row.items())}
            for a, row in sorted(machine.distances.items())
        },
    }
    if machine.cpu_model:
        out["cpu_model"] = machine.cpu_model
    return out


def topology_json(
    machine: Machine, numa_labels: Mapping[int, Mapping[str, str]] | None = None
) -> dict[str, Any]:
    """The `topology --json` document: `machine_to_json`, each NUMA node's `labels`,
    `nics` (interfaces local to a NUMA node, by name), `favoured_cpus` (cores
    that turbo higher than the rest of their class; not a class) and
    `memory_tiers` (the kernel's, fastest first). None of these is in the
    fingerprint (DISPLAY_ONLY): placement does not use them."""
    out = machine_to_json(machine)
    labels = numa_labels or {}
    for socket in out["sockets"]:
        for die in socket["dies"]:
            for node in die["numa_nodes"]:
                node["labels"] = dict(labels.get(node["id"], {}))
    out["nics"] = [{"name": nic.name, "numa_node": nic.numa_node} for nic in machine.nics]
    out["favoured_cpus"] = str(machine.favoured_cpus)
    out["memory_tiers"] = [
        {"id": tier.id, "nodes": str(CPUSet.of(tier.nodes))} for tier in machine.memory_tiers
    ]
    return out


def format_bytes(size: int) -> str:
    """Binary units with one decimal ("96.0 GiB"); bytes stay whole."""
    value = float(size)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _node_line(node: NumaNode) -> str:
    cores = node.cores
    threads = sorted({len(c.cpus) for c in cores})
    per_core = "/".join(map(str, threads))
    l3 = " | ".join(str(g.cpus) for g in sorted(node.l3_groups, key=lambda g: g.id))
    line = (
        f"    node {node.id}  cpus {node.cpus or '-'}  memory {format_bytes(node.memory_bytes)}"
        f"  {len(cores)} cores x {per_core} threads  L3 {l3 or '-'}"
    )
    classes: dict[str, int] = {}
    for core in cores:
        if core.cpu_class is not None:
            classes[core.cpu_class] = classes.get(core.cpu_class, 0) + 1
    if classes:
        line += "  (" + ", ".join(f"{n} {cls}" for cls, n in sorted(classes.items())) + ")"
    return line


def _distance_matrix(machine: Machine) -> list[str]:
    ids = sorted(machine.distances)
    if not ids:
        return []
    width = max(3, *(len(str(d)) + 1 for row in machine.distances.values() for d in row.values()))
    width = max(width, max(len(str(i)) for i in ids) + 1)
    lines = ["distances:", "  node" + "".join(f"{i:>{width}}" for i in ids)]
    for a in ids:
        row = machine.distances[a]
        cells = "".join(f"{row.get(b, '?')!s:>{width}}" for b in ids)
        lines.append(f"  {a:>4}{cells}")
    return lines


def render_text(
    machine: Machine, numa_labels: Mapping[int, Mapping[str, str]] | None = None
) -> str:
    """One line per socket / die / NUMA node (and its labels, when given), then
    memory-only nodes, network interfaces and distances."""
    nodes = list(machine.iter_numa_nodes())
    header = (
        f"machine: {len(machine.online)} CPUs online ({machine.online}), "
        f"{len(machine.sockets)} socket(s), {len(nodes)} NUMA node(s)"
    )
    if machine.cpu_model:
        header += f", {machine.cpu_model}"
    lines = [header]
    if machine.offline or machine.isolated:
        lines.append(f"offline: {machine.offline or '-'}  isolated: {machine.isolated or '-'}")
    for socket in sorted(machine.sockets, key=lambda s: s.id):
        lines.append(f"socket {socket.id}  cpus {socket.cpus}")
        for die in sorted(socket.dies, key=lambda d: d.id):
            lines.append(f"  die {die.id}  cpus {die.cpus}")
            for node in sorted(die.numa_nodes, key=lambda n: n.id):
                lines.append(_node_line(node))
                labels = (numa_labels or {}).get(node.id)
                if labels:
                    lines.append("      labels " + " ".join(f"{k}={v}" for k, v in labels.items()))
    for mem in sorted(machine.memory_only_nodes, key=lambda m: m.id):
        lines.append(
            f"memory-only node {mem.id}  memory {format_bytes(mem.memory_bytes)}"
            f"  closest CPU node {mem.closest_cpu_node}"
        )
    if machine.memory_tiers:
        tiers = ", ".join(
            f"{tier.id} (nodes {CPUSet.of(tier.nodes)})" for tier in machine.memory_tiers
        )
        lines.append(f"memory tiers (fastest first): {tiers}")
    if machine.favoured_cpus:
        lines.append(f"favoured cores (turbo higher, same class): {machine.favoured_cpus}")
    if machine.nics:
        nics = ", ".join(f"{nic.name} (node {nic.numa_node})" for nic in machine.nics)
        lines.append(f"network interfaces: {nics}")
    lines.extend(_distance_matrix(machine))
    return "\n".join(lines) + "\n"
