"""What `simulate` prints: the documented JSON shape, or a table and the machine tree,
and the machine map (HTML) of the agent's books at the end.

Pure functions of a SimulationResult; each running container is shown under
the smallest part of the machine (NUMA node, die, socket, machine) its CPUs fit in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.introspect.document import machine_document
from agent.introspect.machine_map import render_machine_map
from agent.simulate.driver import RunningContainer, SimulationResult
from topology.cpuset import CPUSet
from topology.render import format_bytes
from topology.tree import Machine

TABLE_HEADER = ("NAMESPACE", "POD", "CONTAINER", "CPUS", "MEMS", "EXCLUSIVE", "POOL")


def to_json(result: SimulationResult) -> dict[str, Any]:
    """{"containers": [...], "errors": [...]} exactly as docs/simulate.md documents it."""
    return {
        "containers": [
            {
                "namespace": c.namespace,
                "pod": c.pod,
                "name": c.name,
                "cpuset_cpus": c.cpuset_cpus,
                "cpuset_mems": c.cpuset_mems,
                "exclusive": c.exclusive,
                "pool": c.pool,
            }
            for c in result.containers
        ],
        "errors": [
            {
                "namespace": e.namespace,
                "pod": e.pod,
                "name": e.name,
                "code": e.code,
                "message": e.message,
            }
            for e in result.errors
        ],
    }


def to_html(result: SimulationResult) -> str:
    """The machine map of the agent's books after the scenario's events, drawn from
    the same document `numa-agent status` gets from a running agent (less `agent`)."""
    doc = machine_document(
        result.machine,
        result.scenario.config.reserved_cpus,
        result.placements,
        result.capacity,
    )
    notes = [
        f"refused {e.namespace}/{e.pod}/{e.name}: {e.code}: {e.message}" for e in result.errors
    ]
    return render_machine_map(
        doc,
        source=f"scenario {result.scenario.source}",
        description=" ".join(result.scenario.description.split()),
        notes=notes,
    )


def render_explanations(result: SimulationResult) -> str:
    """Every decision the agent made, in order, with the policy's explanation."""
    lines: list[str] = []
    for d in result.decisions:
        lines.append(f"{d.namespace}/{d.pod}/{d.name} -> {d.pool}")
        lines.extend(f"    {line}" for line in d.explanation.splitlines())
    return "\n".join(lines) + "\n" if lines else "no placement decisions\n"


def render_text(result: SimulationResult) -> str:
    machine = result.machine
    nodes = list(machine.iter_numa_nodes())
    lines = [f"scenario: {result.scenario.source}"]
    if result.scenario.description:
        lines.extend(f"  {line}" for line in result.scenario.description.splitlines())
    lines.append(
        f"machine: {len(machine.online)} CPUs ({machine.online}), {len(machine.sockets)} "
        f"socket(s), {len(nodes)} NUMA node(s)"
        + (f", isolated {machine.isolated}" if machine.isolated else "")
    )
    lines.append("")
    if result.containers:
        lines.extend(_table(result.containers))
    else:
        lines.append("no running containers")
    if result.errors:
        lines.append("")
        lines.append("refused:")
        lines.extend(
            f"  {e.namespace}/{e.pod}/{e.name}: {e.code}: {e.message}" for e in result.errors
        )
    lines.append("")
    lines.append("where they run:")
    lines.extend(_tree(machine, result.containers))
    return "\n".join(lines) + "\n"


def _table(containers: Sequence[RunningContainer]) -> list[str]:
    rows = [TABLE_HEADER] + [
        (
            c.namespace,
            c.pod,
            c.name,
            c.cpuset_cpus or "-",
            c.cpuset_mems or "-",
            "yes" if c.exclusive else "no",
            c.pool or "-",
        )
        for c in containers
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_HEADER))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _cpus(container: RunningContainer, machine: Machine) -> CPUSet:
    # No cpuset (pin_cpus off) means the whole machine.
    return CPUSet.parse(container.cpuset_cpus) if container.cpuset_cpus else machine.cpus


def _who(containers: Sequence[RunningContainer], indent: str) -> list[str]:
    """Exclusive containers one per line; shared ones grouped by their common cpuset."""
    lines: list[str] = []
    shared: dict[str, list[str]] = {}
    for c in containers:
        label = f"{c.namespace}/{c.pod}/{c.name}"
        if c.exclusive:
            lines.append(f"{indent}exclusive {c.cpuset_cpus}: {label}")
        else:
            shared.setdefault(c.cpuset_cpus or "all", []).append(label)
    for cpus, labels in shared.items():
        lines.append(f"{indent}shared {cpus}: {', '.join(labels)}")
    return lines


def _tree(machine: Machine, containers: Sequence[RunningContainer]) -> list[str]:
    """The machine's sockets/dies/nodes, each followed by the containers that fit in it
    and in none of its children."""
    placed: set[str] = set()

    def fits(cpus: CPUSet) -> list[RunningContainer]:
        found = [
            c
            for c in containers
            if c.container_id not in placed and _cpus(c, machine).is_subset(cpus)
        ]
        placed.update(c.container_id for c in found)
        return found

    # Children first, so that a container is claimed by the smallest part it fits in.
    claims: dict[tuple[str, int], list[RunningContainer]] = {}
    for node in machine.iter_numa_nodes():
        claims["node", node.id] = fits(node.cpus)
    for die in machine.iter_dies():
        claims["die", id(die)] = fits(die.cpus)
    for socket in machine.sockets:
        claims["socket", socket.id] = fits(socket.cpus)
    rest = [c for c in containers if c.container_id not in placed]

    lines: list[str] = []
    for socket in sorted(machine.sockets, key=lambda s: s.id):
        lines.append(f"socket {socket.id}  cpus {socket.cpus}")
        lines.extend(_who(claims["socket", socket.id], "  "))
        multi_die = len(socket.dies) > 1
        for die in sorted(socket.dies, key=lambda d: d.id):
            indent = "  "
            if multi_die:
                lines.append(f"  die {die.id}  cpus {die.cpus}")
                indent = "    "
            lines.extend(_who(claims["die", id(die)], indent))
            for node in sorted(die.numa_nodes, key=lambda n: n.id):
                lines.append(
                    f"{indent}node {node.id}  cpus {node.cpus}  "
                    f"memory {format_bytes(node.memory_bytes)}"
                )
                lines.extend(_who(claims["node", node.id], indent + "  "))
    if rest:
        lines.append("across sockets")
        lines.extend(_who(rest, "  "))
    return lines
