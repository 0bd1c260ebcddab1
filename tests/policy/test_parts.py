"""Pools and domains are one view of the tree: the same parts, named alike, on every shape."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from agent.policy.domains import machine_topology, topology
from agent.policy.parts import machine_parts
from agent.policy.pools import build_pools, is_pool
from agent.rules import Level
from tests.policy.helpers import ALL_SHAPES
from topology.cpuset import CPUSet
from topology.shapes import MachineSpec, build_machine
from topology.tree import Machine

Machines = Callable[[str], Machine]

# Compact descriptions beside the named shapes: one or several of each level,
# offline CPUs and machines without L3 cache files.
SPECS = [
    MachineSpec(
        sockets=s,
        dies_per_socket=d,
        numa_per_die=n,
        l3_per_numa=l3,
        threads_per_core=t,
        offline=CPUSet.of([1, 2]) if t == 2 else CPUSet(),
    )
    for s, d, n, l3, t in itertools.product((1, 2), (1, 2), (1, 3), (0, 1, 2), (1, 2))
]


def check_one_view(machine: Machine) -> None:
    tree = build_pools(machine)
    domains_of = topology(tree.parts)  # the rules' domains from the pools' own walk
    assert domains_of == machine_topology(machine)
    for level in Level:
        domains = domains_of[level]
        # The domains of every level partition the online CPUs, each named once.
        assert sum(m.bit_count() for m in domains.masks) == machine.cpus.mask.bit_count()
        union = 0
        for mask in domains.masks:
            assert mask and not mask & union
            union |= mask
        assert union == machine.cpus.mask
        assert len(set(domains.names)) == len(domains.names)
        assert sorted(domains.indices(machine.cpus.mask)) == list(range(len(domains.names)))
    for pool in tree.pools:
        # A pool is the domain of the same name at its level.
        domains = domains_of[pool.level]
        index = domains.names.index(pool.name)
        assert domains.masks[index] == pool.cpus.mask, pool.name
        assert domains.single(pool.cpus.mask) == index
    assert tree.root.level is Level.HOST and tree.root.name == "machine"


@pytest.mark.parametrize("name", ALL_SHAPES)
def test_pools_are_domains(machines: Machines, name: str) -> None:
    check_one_view(machines(name))


def spec_id(spec: MachineSpec) -> str:
    return (
        f"{spec.sockets}s{spec.dies_per_socket}d{spec.numa_per_die}n"
        f"{spec.l3_per_numa}l3-{spec.threads_per_core}t"
    )


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_pools_are_domains_on_specs(spec: MachineSpec) -> None:
    check_one_view(build_machine(spec))


@pytest.mark.parametrize("name", ALL_SHAPES)
def test_parts_nest_and_fold(machines: Machines, name: str) -> None:
    machine = machines(name)
    parts = machine_parts(machine)
    names = {p.name for p in build_pools(machine).pools}
    for part in parts.parts:
        inner = [parts.parts[c] for c in part.children]
        assert CPUSet().union(*(c.cpus for c in inner)) == (part.cpus if inner else CPUSet())
        assert all(parts.parts[c].parent == part.index for c in part.children)
        # A part is a pool, or a core, or its parent's only child (the same CPUs).
        if is_pool(parts, part):
            assert part.name in names
        else:
            assert part.name not in names
            assert part.parent is not None
            parent = parts.parts[part.parent]
            assert part.level is Level.CORE or parent.cpus == part.cpus


def test_every_level_has_words() -> None:
    assert all(level.word for level in Level)
    assert Level.NUMA.word == "NUMA node"
