"""The machine map: the status document as one self-contained HTML page, a pure function.

Sockets contain dies, NUMA nodes and L3 groups (a level is drawn as a box when it has
more than one of its kind, NUMA nodes and sockets always), those contain cores, and each
core is a box of its hardware threads. Every CPU is coloured by its use; an exclusive
container's name is written on each of its CPUs; shared containers are listed in the
box of the pool they were placed in. Details are in `title` attributes, shown on hover:
the page has no script, no external resource, and prints as it shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from agent.introspect.cpu_map import (
    Container,
    Core,
    Cpu,
    CpuUse,
    Die,
    L3Group,
    MachineMap,
    MemoryNode,
    NumaNode,
    Pool,
    Socket,
    build_map,
)
from agent.introspect.map_style import STYLE
from agent.introspect.render import format_duration
from topology.render import format_bytes

# The CSS class of each use (short: a 512-CPU page has one per CPU) and its legend text.
USE_CLASS = {
    CpuUse.EXCLUSIVE: "x",
    CpuUse.SHARED: "s",
    CpuUse.RESERVED: "r",
    CpuUse.ISOLATED: "i",
    CpuUse.OFFLINE: "o",
}
LEGEND = {
    CpuUse.EXCLUSIVE: "exclusive to one container (its name on the CPU)",
    CpuUse.SHARED: "shared: runs the shared containers of its pools",
    CpuUse.RESERVED: "reserved for system pods",
    CpuUse.ISOLATED: "isolated (isolcpus), free",
    CpuUse.OFFLINE: "offline",
}
# The CPU cell's width in CSS pixels and the label font's mean character width:
# how much of a container's name fits on its CPUs.
CELL_PX = 54
CHAR_PX = 5.8
MIDDLE_CUT_MIN = 14  # fewer characters than this: a middle cut leaves too little of either end
# Written on CPUs with no exclusive owner, so the page reads in grey print too.
_WORD = {
    CpuUse.SHARED: "",
    CpuUse.RESERVED: "reserved",
    CpuUse.ISOLATED: "isolated",
    CpuUse.OFFLINE: "offline",
}


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _n(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def render_machine_map(
    doc: Mapping[str, Any],
    *,
    source: str = "",
    description: str = "",
    notes: Sequence[str] = (),
) -> str:
    """The page for a status document (MapError if it cannot be drawn). `source` says
    where the state comes from when the document has no agent (a simulated scenario),
    `description` what it is; `notes` are warnings under the header (refusals)."""
    return render_map(build_map(doc), source=source, description=description, notes=notes)


def render_map(
    m: MachineMap, *, source: str = "", description: str = "", notes: Sequence[str] = ()
) -> str:
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{_e(_title(m, source))}</title>",
        f"<style>{STYLE}{_columns(m)}</style></head><body>",
        *_header(m, source, description, notes),
        f'<main class="box machine" id="machine"{_pool_attr(m.machine_pool)}>',
        _heading("h2", "machine", f"CPUs {m.cpus}", m.machine_pool),
    ]
    if m.machine_pool is not None:
        parts.append(_capacity(m.machine_pool))
    for socket in m.sockets:
        parts.extend(_socket(socket))
    if m.offline:
        parts.append('<section class="box offline" id="offline"><h3>offline CPUs</h3>')
        parts.append('<div class="cores">')
        parts.extend(_cpu(cpu, "offline") for cpu in m.offline)
        parts.append("</div></section>")
    if m.machine_pool is not None:
        parts.extend(_chips(m.machine_pool.shared, "ctrs"))
    if m.reserved or m.reserved_cpus:
        parts.append('<section class="box" id="pool-reserved" data-pool="reserved">')
        parts.append(
            f"<h3>reserved <small>CPUs {_e(m.reserved_cpus or 'none: the shared CPUs')}"
            "</small></h3>"
        )
        parts.extend(_chips(m.reserved, "ctrs rsv"))
        parts.append("</section>")
    for name, containers in m.elsewhere:
        parts.append(f'<section class="box" data-pool="{_e(name)}">')
        parts.append(f"<h3>{_e(name)} <small>(a pool with no box on this map)</small></h3>")
        parts.extend(_chips(containers, "ctrs"))
        parts.append("</section>")
    parts.append("</main></body></html>\n")
    return "".join(parts)


def _columns(m: MachineMap) -> str:
    """Grid placement classes for as many threads per core as this machine has:
    `kN` puts a CPU (or a label) in column N, `nN` makes a label span N columns."""
    threads = max((len(core.cpus) for core in m.cores()), default=1)
    starts = "".join(f".k{i}{{grid-column-start:{i}}}" for i in range(1, threads + 1))
    spans = "".join(f".n{i}{{grid-column-end:span {i}}}" for i in range(2, threads + 1))
    return f"\n{starts}{spans}\n"


def _title(m: MachineMap, source: str) -> str:
    where = source or ("numa-agent pid {}".format(m.agent["pid"]) if m.agent else "")
    return f"machine map: {where}" if where else "machine map"


def _header(m: MachineMap, source: str, description: str, notes: Sequence[str]) -> list[str]:
    out = ["<header><h1>numa-agent machine map</h1>"]
    agent = m.agent
    if agent:
        out.append(
            f'<p class="meta">numa-agent {_e(agent["version"])} · pid {_e(agent["pid"])} · up '
            f"{_e(format_duration(float(agent['uptime_seconds'])))} · serving "
            f"{_e(agent['listen'])} → runtime {_e(agent['runtime_endpoint'])} · "
            f"{len(m.containers)} containers placed · "
            f"{_e(agent['pending_updates'])} cpuset updates pending</p>"
        )
    if source or description:
        text = f"{source}: {description}" if source and description else source or description
        out.append(f'<p class="meta">{_e(text)}</p>')
    machine = [
        f"{sum(m.uses.values()) - m.uses[CpuUse.OFFLINE]} CPUs ({_e(m.cpus)})",
        _n(len(m.sockets), "socket"),
        _n(m.numa_node_count, "NUMA node"),
    ]
    memory_nodes = sum(len(s.memory_nodes) for s in m.sockets)
    if memory_nodes:
        machine.append(_n(memory_nodes, "memory-only node"))
    if m.reserved_cpus:
        machine.append(f"reserved {_e(m.reserved_cpus)}")
    if m.isolated_cpus:
        machine.append(f"isolated {_e(m.isolated_cpus)}")
    if m.offline:
        machine.append(f"offline {len(m.offline)}")
    out.append(f'<p class="meta">{" · ".join(machine)}</p>')
    out.extend(f'<p class="note">{_e(line)}</p>' for line in notes)
    out.append('<ul class="legend">')
    for use in CpuUse:
        count = m.uses[use]
        extra = f", {_n(m.exclusive_containers, 'container')}" if use is CpuUse.EXCLUSIVE else ""
        out.append(
            f'<li data-use="{use}"><span class="sw {USE_CLASS[use]}"></span>'
            f"{_e(LEGEND[use])} ({_n(count, 'CPU')}{extra})</li>"
        )
    if m.isolated_cpus:
        out.append('<li><span class="sw x iso"></span>exclusive, on an isolated CPU</li>')
    shared = sum(1 for c in m.containers if not c.exclusive)
    out.append(
        f'<li><span class="sw m"></span>memory-only NUMA node</li>'
        f"<li>{_n(shared, 'shared container')} listed in their pool's box; hover for details</li>"
    )
    out.append("</ul></header>")
    return out


def _pool_attr(pool: Pool | None) -> str:
    """Names the pool a box stands for (the policy's pool names: socket0, numa1, ...)."""
    return "" if pool is None else f' data-pool="{_e(pool.name)}"'


def _heading(tag: str, label: str, detail: str, pool: Pool | None) -> str:
    if pool is not None:
        detail += f" · pool {pool.name}"
    return f"<{tag}>{_e(label)} <small>{_e(detail)}</small></{tag}>"


def _capacity(pool: Pool) -> str:
    free = f"{pool.exclusive_free} free"
    if pool.isolated_free:
        free += f" (+{pool.isolated_free} isolated)"
    text = (
        f"exclusive {pool.exclusive_used} used, {free} · shared {_n(pool.shared_cpus, 'CPU')}, "
        f"{pool.shared_milli_used}m used, {pool.shared_milli_free}m free"
    )
    if pool.memory_bytes:
        text += (
            f" · memory {format_bytes(pool.memory_used_bytes)} of "
            f"{format_bytes(pool.memory_bytes)} requested"
        )
    return f'<p class="cap">{_e(text)}</p>'


def _chips(containers: Iterable[Container], cls: str) -> list[str]:
    items = [
        f'<li title="{_e(_describe(c))}">{_e(_label(c))}</li>'
        for c in sorted(containers, key=lambda c: (c.namespace, c.pod, c.name))
    ]
    if not items:
        return []
    return [f'<ul class="{cls}">', *items, "</ul>"]


def _label(c: Container) -> str:
    who = f"{c.pod}/{c.name}"
    return who if c.namespace == "default" else f"{c.namespace}/{who}"


def _describe(c: Container) -> str:
    kind = "exclusive" if c.exclusive else "shared"
    return (
        f"{c.who}\ncontainer {c.short_id}\n{kind} CPUs {c.cpus or 'all'}, "
        f"memory nodes {c.mems or 'all'}\npool {c.pool} · score {c.score:g}"
    )


def _box(cls: str, box_id: str, heading: str, pool: Pool | None, inside: list[str]) -> list[str]:
    """One level's box (socket, die, NUMA node, L3 group): its heading, its pool's
    capacity, what it holds, then the shared containers of its pool."""
    id_attr = f' id="{box_id}"' if box_id else ""
    out = [f'<section class="box {cls}"{id_attr}{_pool_attr(pool)}>', heading]
    if pool is not None:
        out.append(_capacity(pool))
    out.extend(inside)
    if pool is not None:
        out.extend(_chips(pool.shared, "ctrs"))
    out.append("</section>")
    return out


def _kids(boxes: Iterable[list[str]]) -> list[str]:
    return ['<div class="kids">', *(line for box in boxes for line in box), "</div>"]


def _socket(socket: Socket) -> list[str]:
    where = f"socket {socket.id}"
    if len(socket.dies) > 1:
        kids = _kids(_die(die, where) for die in socket.dies)
    else:
        kids = _kids(_node(node, where) for die in socket.dies for node in die.numa_nodes)
    heading = _heading("h2", f"socket {socket.id}", f"CPUs {socket.cpus}", socket.pool)
    return [
        '<div class="row">',
        *_box("socket", f"socket{socket.id}", heading, socket.pool, kids),
        *(_memory_node(m) for m in socket.memory_nodes),
        "</div>",
    ]


def _die(die: Die, where: str) -> list[str]:
    where = f"die {die.id} · {where}"
    heading = _heading("h3", f"die {die.id}", f"CPUs {die.cpus}", die.pool)
    return _box("die", "", heading, die.pool, _kids(_node(node, where) for node in die.numa_nodes))


def _node(node: NumaNode, where: str) -> list[str]:
    where = f"NUMA {node.id} · {where}"
    detail = f"CPUs {node.cpus} · {format_bytes(node.memory_bytes)}"
    if len(node.l3_groups) > 1:
        inside = _kids(_l3(group, where) for group in node.l3_groups)
    else:
        inside = [line for group in node.l3_groups for line in _cores(group.cores, where)]
    heading = _heading("h3", f"NUMA {node.id}", detail, node.pool)
    return _box("numa", f"numa{node.id}", heading, node.pool, inside)


def _l3(group: L3Group, where: str) -> list[str]:
    where = f"L3 group {group.id} · {where}"
    heading = _heading("h3", "L3 group", f"CPUs {group.cpus}", group.pool)
    return _box("l3", "", heading, group.pool, _cores(group.cores, where))


def _cores(cores: Sequence[Core], where: str) -> list[str]:
    out = ['<div class="cores">']
    for core in cores:
        threads = ",".join(str(cpu.id) for cpu in core.cpus)
        kinds = [k for k in (core.cpu_class, "favoured" if core.favoured else None) if k]
        kind = f" ({', '.join(kinds)})" if kinds else ""
        here = f"core {core.id}{kind}, threads {threads} · {where}"
        cls = "core e" if core.cpu_class == "efficiency" else "core"
        cls += " f" if core.favoured else ""
        out.append(f'<div class="{cls}" title="{_e(here)}">')
        out.extend(_cpu(cpu, here, column) for column, cpu in enumerate(core.cpus, 1))
        out.extend(_labels(core.cpus))
        out.append("</div>")
    out.append("</div>")
    return out


def _labels(cpus: Sequence[Cpu]) -> list[str]:
    """One label per run of a core's threads held by the same exclusive container,
    laid over those threads (a grid item spanning their columns)."""
    out = []
    column = 1
    while column <= len(cpus):
        owner = cpus[column - 1].owner
        span = 1
        while (
            owner is not None
            and column + span <= len(cpus)
            and cpus[column + span - 1].owner is owner
        ):
            span += 1
        if owner is not None:
            chars = _chars(span)
            out.append(
                f'<span class="who k{column} n{span}" data-for="{_e(owner.short_id)}" '
                f'title="{_e(_describe(owner))}"><span>{_e(_fit(owner.pod, chars))}</span>'
                f"<span>{_e(_fit(owner.name, chars))}</span></span>"
            )
        column += span
    return out


def _chars(span: int) -> int:
    """About how many characters of the label font fit over `span` CPU cells."""
    return int((span * CELL_PX + (span - 1) - 6) / CHAR_PX)


def _fit(text: str, chars: int) -> str:
    """Cut from the middle: pod names differ at their end (web-7d9f8-x2k9q), and
    their start says what they are; the whole name is in the title."""
    if len(text) <= chars or chars < MIDDLE_CUT_MIN:
        return text  # on one CPU: the start (the CSS cuts it), which says what it is
    head = (chars - 1) // 2
    return f"{text[:head]}…{text[len(text) - (chars - 1 - head) :]}"


def _cpu(cpu: Cpu, where: str, column: int = 0) -> str:
    cls = USE_CLASS[cpu.use]
    if cpu.owner is not None and cpu.isolated:
        cls += " iso"  # an exclusive container on an isolated CPU: marked, same colour
    if column:
        cls += f" k{column}"
    owner = cpu.owner
    if owner is not None:
        isolated = " (an isolated CPU)" if cpu.isolated else ""
        title = f"CPU {cpu.id}{isolated} · {where}\nexclusive to {_describe(owner)}"
        return (
            f'<div class="cpu {cls}" data-cpu="{cpu.id}" data-c="{_e(owner.short_id)}" '
            f'title="{_e(title)}">{cpu.id}</div>'
        )
    if cpu.use is CpuUse.OFFLINE:
        title = f"CPU {cpu.id}: offline (no topology while offline)"
    else:
        runs = f"{cpu.runs} container{'s' if cpu.runs != 1 else ''} may run here"
        title = f"CPU {cpu.id} · {where}\n{LEGEND[cpu.use]}\n{runs}"
    word = _WORD[cpu.use]
    return (
        f'<div class="cpu {cls}" data-cpu="{cpu.id}" title="{_e(title)}">{cpu.id}'
        + (f"<i>{word}</i>" if word else "")
        + "</div>"
    )


def _memory_node(node: MemoryNode) -> str:
    title = (
        f"NUMA node {node.id}: {format_bytes(node.memory_bytes)} of memory and no CPUs "
        f"(CXL, PMEM or HBM); closest to NUMA node {node.closest_cpu_node} "
        f"(distance {node.distance}); containers placed on node {node.closest_cpu_node} "
        "may use it (cpuset mems)"
    )
    return (
        f'<section class="box mem" id="memnode{node.id}" title="{_e(title)}">'
        f"<h3>memory node {node.id}</h3><p>{_e(format_bytes(node.memory_bytes))}, no CPUs</p>"
        f"<p>next to NUMA {node.closest_cpu_node} (distance {node.distance})</p></section>"
    )
