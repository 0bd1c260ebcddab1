"""How close two pools are, from the hardware: a number in (0, 1], 1 = same NUMA node.

Node closeness is tiered so that same NUMA > same die > same socket > other
socket always holds, and decreases with the sysfs NUMA distance inside a tier;
pool closeness is its average over node pairs (see docs/placement.md).
"""

from __future__ import annotations

from agent.policy.pools import PoolTree
from topology.tree import Machine

# Tier bounds: (floor, span). Closeness of distinct nodes = floor + span * 10 / d,
# with d >= 11, so each tier stays strictly inside (floor, floor + span * 10/11].
SAME_DIE = (0.75, 0.25)
SAME_SOCKET = (0.5, 0.25)
OTHER_SOCKET = (0.0, 0.5)
LOCAL_DISTANCE = 10


def _where(machine: Machine) -> dict[int, tuple[int, int]]:
    """NUMA node id -> (socket id, die index within the machine)."""
    out: dict[int, tuple[int, int]] = {}
    die_index = 0
    for socket in machine.sockets:
        for die in socket.dies:
            for node in die.numa_nodes:
                out[node.id] = (socket.id, die_index)
            die_index += 1
    return out


def node_closeness(machine: Machine, a: int, b: int) -> float:
    if a == b:
        return 1.0
    where = _where(machine)
    return _tiered(machine, where, a, b)


def _tiered(machine: Machine, where: dict[int, tuple[int, int]], a: int, b: int) -> float:
    if a == b:
        return 1.0
    # sysfs tables are usually symmetric; average in case firmware says otherwise.
    distance = (machine.distance(a, b) + machine.distance(b, a)) / 2
    scaled = LOCAL_DISTANCE / max(distance, LOCAL_DISTANCE + 1)
    socket_a, die_a = where[a]
    socket_b, die_b = where[b]
    if die_a == die_b:
        floor, span = SAME_DIE
    elif socket_a == socket_b:
        floor, span = SAME_SOCKET
    else:
        floor, span = OTHER_SOCKET
    return floor + span * scaled


def closeness_table(machine: Machine, tree: PoolTree) -> tuple[tuple[float, ...], ...]:
    """table[p][q] = mean node closeness over (node of p, node of q); computed once per machine."""
    where = _where(machine)
    nodes = sorted(where)
    pair = {(a, b): _tiered(machine, where, a, b) for a in nodes for b in nodes}
    table: list[tuple[float, ...]] = []
    for p in tree.pools:
        row: list[float] = []
        for q in tree.pools:
            total = sum(pair[a, b] for a in p.numa_nodes for b in q.numa_nodes)
            row.append(total / (len(p.numa_nodes) * len(q.numa_nodes)))
        table.append(tuple(row))
    return tuple(table)
