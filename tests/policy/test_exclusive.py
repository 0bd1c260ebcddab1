"""Exclusive CPU choice: whole cores, NUMA and L3 packing, isolated CPUs, spanning nodes.

Each case: a machine shape, containers placed before (key, CPUs, forced pool or
None), then one request, and exactly which CPUs and pool it must get.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.policy.cpus import pick_cores
from agent.policy.request import PREFER_ISOLATED
from tests.policy.helpers import policy, request
from topology.cpuset import CPUSet
from topology.tree import Core, Machine

Machines = Callable[[str], Machine]
Before = tuple[tuple[str, int, str | None], ...]

ISO = {f"{PREFER_ISOLATED}/pod": "true"}


@pytest.mark.parametrize(
    ("shape", "before", "count", "annotations", "pool", "cpus"),
    [
        # xeon-2s-2numa: CPU i and i+40 are siblings; numa0 = 0-9,40-49.
        ("xeon-2s-2numa", (), 4, {}, "numa0", "0-1,40-41"),
        # Odd: one whole core, then one thread of the next core.
        ("xeon-2s-2numa", (), 3, {}, "numa0", "0-1,40"),
        # A lone thread goes to the already split core (41), not a fresh one.
        ("xeon-2s-2numa", (("a", 3, None),), 1, {}, "numa0", "41"),
        # Best fit: numa0 has 16 free after "a", the other nodes 20.
        ("xeon-2s-2numa", (("a", 4, None),), 2, {}, "numa0", "2,42"),
        # Larger than a node (20 CPUs): the two nodes of one socket (distance 11),
        # the first used up, the rest from the second.
        ("xeon-2s-2numa", (), 24, {}, "socket0", "0-11,40-51"),
        # Larger than a socket: spans sockets through the machine pool.
        ("xeon-2s-2numa", (), 44, {}, "machine", "0-21,40-61"),
        # epyc: two L3 groups (CCDs) of 8 cores per node: a small request stays in one.
        ("epyc-2s-nps4", (), 4, {}, "l3-0.0", "0-1,128-129"),
        # 20 CPUs > one L3 group (16): fill one group, 4 from its neighbour.
        ("epyc-2s-nps4", (), 20, {}, "numa0", "0-9,128-137"),
        # The group with fewer free CPUs that still fits is filled first.
        ("epyc-2s-nps4", (("a", 10, "l3-0.0"),), 6, {}, "l3-0.0", "5-7,133-135"),
        # dies-2-per-socket: 48 CPUs = a whole socket's two dies.
        ("dies-2-per-socket", (), 30, {}, "socket0", "0-14,48-62"),
        # isolated-offline: adjacent siblings (2k, 2k+1); 2-5 isolated; 13-15 offline,
        # so CPU 12 is a core with one online thread.
        ("isolated-offline", (), 2, {}, "numa0", "0-1"),
        ("isolated-offline", (), 1, {}, "numa1", "12"),
        ("isolated-offline", (), 2, ISO, "numa0", "2-3"),
        ("isolated-offline", (), 4, ISO, "numa0", "2-5"),
        # More than the isolated CPUs: ordinary CPUs only, never a mix.
        ("isolated-offline", (), 5, ISO, "numa1", "8-12"),
        # hybrid-desktop: P-cores 0-15 (two threads), E-cores 16-23 (one thread).
        # Exclusive containers get performance cores by default, even for one CPU
        # (a lone E-core would be a whole core, but of the slow kind).
        ("hybrid-desktop", (), 2, {}, "machine", "0-1"),
        ("hybrid-desktop", (), 1, {}, "machine", "0"),
        # Cores (0,4), (1,5), (2,6) whole, then the lower thread of (3,7).
        ("desktop-1s-4c-ht", (), 7, {}, "machine", "0-6"),
        ("server-4s", (("a", 40, None),), 40, {}, "socket1", "24-43,120-139"),
    ],
)
def test_exclusive_choice(
    machines: Machines,
    shape: str,
    before: Before,
    count: int,
    annotations: dict[str, str],
    pool: str,
    cpus: str,
) -> None:
    pol = policy(machines(shape))
    for key, n, where in before:
        req = request(key, n * 1000)
        if where is None:
            pol.place(req)
        else:
            pol.place_in(req, where)
    decision = pol.place(request("new", count * 1000, annotations=annotations))
    assert decision.exclusive
    assert (decision.pool, str(decision.cpus)) == (pool, cpus)
    pol.check_invariants()


def test_isolated_cpus_only_when_asked(machines: Machines) -> None:
    machine = machines("isolated-offline")
    pol = policy(machine)
    taken = CPUSet()
    for i in range(4):
        taken |= pol.place(request(f"x{i}", 1000)).cpus
    assert taken.isdisjoint(machine.isolated)
    pol = policy(machine, isolated_for_exclusive=True)
    assert pol.place(request("y", 2000)).cpus == CPUSet.parse("2-3")


def test_memory_nodes_follow_the_cpus(machines: Machines) -> None:
    pol = policy(machines("cxl-memory-only"))
    # Node 0 with its CXL expander (node 2).
    assert str(pol.place(request("a", 2000)).mems) == "0,2"
    big = pol.place(request("b", 40_000))
    assert (big.pool, str(big.mems)) == ("machine", "0-3")


def _cores(*threads: tuple[int, ...]) -> list[Core]:
    return [Core(id=t[0], cpus=CPUSet.of(t)) for t in threads]


@pytest.mark.parametrize(
    ("free", "count", "cpus", "split"),
    [
        ("0-7", 4, "0-3", 0),
        ("0-7", 3, "0-2", 1),
        # Core (2,3) is already split: its free thread serves the odd remainder.
        ("0-2,4-7", 3, "0-2", 0),
        # No whole core left: threads of split cores.
        ("1,3,5", 2, "1,3", 0),
        ("0-7", 8, "0-7", 0),
    ],
)
def test_pick_cores(free: str, count: int, cpus: str, split: int) -> None:
    cores = _cores((0, 1), (2, 3), (4, 5), (6, 7))
    pick = pick_cores(cores, CPUSet.parse(free).mask, count)
    assert (str(CPUSet(pick.mask)), pick.split_cores) == (cpus, split)
