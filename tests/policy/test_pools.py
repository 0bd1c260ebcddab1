"""The pool tree of each machine shape and the closeness between its pools."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from agent.policy.closeness import closeness_table, node_closeness
from agent.policy.pools import build_pools
from tests.policy.helpers import ALL_SHAPES
from topology.shapes import MachineSpec
from topology.tree import Machine

Machines = Callable[[str], Machine]


@pytest.mark.parametrize(
    ("name", "pools"),
    [
        # One socket, one node, one L3: everything collapses into the machine.
        ("desktop-1s-4c-ht", [("machine", "0-7", "0")]),
        ("hybrid-desktop", [("machine", "0-23", "0")]),
        (
            "xeon-2s-2numa",
            [
                ("machine", "0-79", "0-3"),
                ("socket0", "0-19,40-59", "0-1"),
                ("numa0", "0-9,40-49", "0"),
                ("numa1", "10-19,50-59", "1"),
                ("socket1", "20-39,60-79", "2-3"),
                ("numa2", "20-29,60-69", "2"),
                ("numa3", "30-39,70-79", "3"),
            ],
        ),
        # One node per socket: the node collapses into its socket.
        (
            "server-4s",
            [
                ("machine", "0-191", "0-3"),
                ("socket0", "0-23,96-119", "0"),
                ("socket1", "24-47,120-143", "1"),
                ("socket2", "48-71,144-167", "2"),
                ("socket3", "72-95,168-191", "3"),
            ],
        ),
        (
            "dies-2-per-socket",
            [
                ("machine", "0-95", "0-3"),
                ("socket0", "0-23,48-71", "0-1"),
                ("die0.0", "0-11,48-59", "0"),
                ("die0.1", "12-23,60-71", "1"),
                ("socket1", "24-47,72-95", "2-3"),
                ("die1.0", "24-35,72-83", "2"),
                ("die1.1", "36-47,84-95", "3"),
            ],
        ),
        # Memory-only (CXL) nodes 2 and 3 join the mems of the socket they hang off.
        (
            "cxl-memory-only",
            [
                ("machine", "0-63", "0-3"),
                ("socket0", "0-15,32-47", "0,2"),
                ("socket1", "16-31,48-63", "1,3"),
            ],
        ),
        # Offline CPUs 13-15 are not in any pool; isolated ones are (they are online).
        (
            "isolated-offline",
            [("machine", "0-12", "0-1"), ("numa0", "0-7", "0"), ("numa1", "8-12", "1")],
        ),
    ],
)
def test_pool_tree(machines: Machines, name: str, pools: list[tuple[str, str, str]]) -> None:
    tree = build_pools(machines(name))
    assert [(p.name, str(p.cpus), str(p.mems)) for p in tree.pools] == pools
    for pool in tree.pools:
        for child in tree.children[pool.index]:
            assert tree.pools[child].cpus.is_subset(pool.cpus)
            assert tree.pools[child].depth == pool.depth + 1


def test_epyc_l3_pools(machines: Machines) -> None:
    tree = build_pools(machines("epyc-2s-nps4"))
    names = [p.name for p in tree.pools]
    # 1 machine + 2 sockets + 8 nodes + 16 L3 groups (two CCDs per node).
    assert len(names) == 27
    assert names[:5] == ["machine", "socket0", "numa0", "l3-0.0", "l3-0.8"]
    assert str(tree.by_name("l3-0.8").cpus) == "8-15,136-143"
    assert tree.by_name("l3-0.8").ancestors == (2, 1, 0)


@pytest.mark.parametrize("name", ALL_SHAPES)
def test_closeness_tiers_strictly_ordered(machines: Machines, name: str) -> None:
    machine = machines(name)
    where = {}
    for socket in machine.sockets:
        for die in socket.dies:
            for node in die.numa_nodes:
                where[node.id] = (socket.id, (socket.id, die.id))
    tiers: dict[int, list[float]] = {0: [], 1: [], 2: [], 3: []}
    for a, b in itertools.product(where, repeat=2):
        value = node_closeness(machine, a, b)
        if a == b:
            tier = 0
        elif where[a][1] == where[b][1]:
            tier = 1
        elif where[a][0] == where[b][0]:
            tier = 2
        else:
            tier = 3
        tiers[tier].append(value)
    assert all(v == 1.0 for v in tiers[0])
    bounds = [(min(v), max(v)) for _, v in sorted(tiers.items()) if v]
    for (low, _), (_, high) in itertools.pairwise(bounds):
        assert low > high


def test_closeness_decreases_with_distance(
    spec_machines: Callable[[MachineSpec, str], Machine],
) -> None:
    spec = MachineSpec(
        numa_per_die=3,
        cores_per_numa=2,
        distances=((10, 11, 13), (11, 10, 12), (13, 12, 10)),
    )
    machine = spec_machines(spec, "three-nodes")
    assert (
        node_closeness(machine, 0, 1)
        > node_closeness(machine, 1, 2)
        > node_closeness(machine, 0, 2)
    )
    # Same die: 0.75 + 0.25 * 10 / d.
    assert node_closeness(machine, 0, 2) == pytest.approx(0.75 + 0.25 * 10 / 13)


def test_pool_closeness_is_the_mean_over_node_pairs(machines: Machines) -> None:
    machine = machines("xeon-2s-2numa")
    tree = build_pools(machine)
    table = closeness_table(machine, tree)
    same_socket = 0.75 + 0.25 * 10 / 11  # numa0-numa1, distance 11, one die per socket
    remote = 0.5 * 10 / 21  # other socket, distance 21
    machine_pool, socket0, numa0, numa2 = (
        tree.by_name(n).index for n in ("machine", "socket0", "numa0", "numa2")
    )
    assert table[numa0][numa0] == 1.0
    assert table[numa0][numa2] == pytest.approx(remote)
    assert table[socket0][numa0] == pytest.approx((1 + same_socket) / 2)
    assert table[machine_pool][numa0] == pytest.approx((1 + same_socket + 2 * remote) / 4)
    # A wider pool is never closer to anything than its best child: the score of a
    # pool is the mean of its nodes' scores, so deeper pools win on affinity too.
    for p in tree.pools:
        for q in tree.pools:
            children = tree.children[p.index]
            if children:
                assert table[p.index][q.index] <= max(table[c][q.index] for c in children) + 1e-12
