"""Choosing exclusive CPUs inside a pool: whole cores first, packed into few L3 groups and nodes.

Works on integer CPU masks (one big-int op per set operation) and the pool's
layout of NUMA nodes -> L3 groups -> cores; knows nothing about containers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from topology.tree import Core, L3Group


@dataclass(frozen=True, slots=True)
class Pick:
    mask: int  # the chosen CPUs
    split_cores: int  # cores that were wholly free and now are partly taken


@dataclass(frozen=True, slots=True)
class _Unit:
    key: int  # node id or L3 group id
    mask: int
    free: int  # free CPUs in the unit


Distance = Callable[[int, int], float]


def pick_exclusive(
    layout: Sequence[tuple[int, Sequence[L3Group]]],
    free: int,
    count: int,
    distance: Distance,
) -> Pick | None:
    """`count` CPUs out of `free` (a mask) within the layout; None if there are not enough.

    One NUMA node when any can hold the request (the fullest that fits, to keep
    large holes for large requests); otherwise the fewest nodes, closest by distance.
    """
    groups_of = {node: groups for node, groups in layout}
    units = []
    for node, groups in layout:
        mask = 0
        for group in groups:
            mask |= group.cpus.mask
        units.append(_Unit(node, mask, (mask & free).bit_count()))
    if sum(u.free for u in units) < count:
        return None
    chosen = _fit_one(units, count) or _span_nodes(units, count, distance)
    result = 0
    split = 0
    for unit, take in _fill(chosen, count):
        pick = _pick_in_node(groups_of[unit.key], free, take)
        result |= pick.mask
        split += pick.split_cores
    return Pick(result, split)


def _fit_one(units: Sequence[_Unit], count: int) -> list[_Unit] | None:
    fitting = [u for u in units if u.free >= count]
    if not fitting:
        return None
    return [min(fitting, key=lambda u: (u.free, u.key))]


def _fill(chosen: Sequence[_Unit], count: int) -> list[tuple[_Unit, int]]:
    """Use up the smaller units whole and take the rest from the largest: one big hole stays."""
    out: list[tuple[_Unit, int]] = []
    remaining = count
    for unit in sorted(chosen, key=lambda u: (u.free, u.key)):
        if remaining <= 0:
            break
        take = min(unit.free, remaining)
        out.append((unit, take))
        remaining -= take
    return out


def _span_nodes(units: Sequence[_Unit], count: int, distance: Distance) -> list[_Unit]:
    """Fewest NUMA nodes that hold `count`, then the smallest sum of pairwise distances."""
    options: list[list[_Unit]] = [_greedy(sorted(units, key=lambda u: (-u.free, u.key)), count)]
    for start in units:
        if start.free == 0:
            continue
        rest = sorted(
            (u for u in units if u is not start),
            key=lambda u: (distance(start.key, u.key), -u.free, u.key),
        )
        options.append(_greedy([start, *rest], count))

    def cost(option: list[_Unit]) -> tuple[int, float, tuple[int, ...]]:
        pairs = sum(distance(a.key, b.key) for a in option for b in option if a.key < b.key)
        return len(option), pairs, tuple(sorted(u.key for u in option))

    return min(options, key=cost)


def _greedy(ordered: Sequence[_Unit], count: int) -> list[_Unit]:
    out: list[_Unit] = []
    total = 0
    for unit in ordered:
        if total >= count:
            break
        if unit.free:
            out.append(unit)
            total += unit.free
    return out


def _pick_in_node(groups: Sequence[L3Group], free: int, count: int) -> Pick:
    units = [_Unit(g.id, g.cpus.mask, (g.cpus.mask & free).bit_count()) for g in groups]
    chosen = _fit_one(units, count)
    if chosen is None:
        chosen = _greedy(sorted(units, key=lambda u: (-u.free, u.key)), count)
    by_id = {g.id: g for g in groups}
    result = 0
    split = 0
    for unit, take in _fill(chosen, count):
        pick = pick_cores(by_id[unit.key].cores, free, take)
        result |= pick.mask
        split += pick.split_cores
    return Pick(result, split)


def pick_cores(cores: Sequence[Core], free: int, count: int) -> Pick:
    """Whole free cores first; a lone thread only for the odd remainder or when no whole core
    is left, taken from an already split core before splitting another."""
    whole: list[int] = []
    partial = 0
    for core in cores:
        mask = core.cpus.mask
        available = mask & free
        if available == mask:
            whole.append(mask)
        elif available:
            partial |= available
    result = 0
    remaining = count
    used: set[int] = set()
    for index, mask in enumerate(whole):
        size = mask.bit_count()
        if size <= remaining:
            result |= mask
            remaining -= size
            used.add(index)
            if remaining == 0:
                break
    split = 0
    if remaining:
        taken = _lowest(partial, remaining)
        result |= taken
        remaining -= taken.bit_count()
    for index, mask in enumerate(whole):
        if remaining <= 0:
            break
        if index in used:
            continue
        taken = _lowest(mask, remaining)
        result |= taken
        remaining -= taken.bit_count()
        split += 1
    return Pick(result, split)


def _lowest(mask: int, count: int) -> int:
    out = 0
    while mask and count > 0:
        low = mask & -mask
        out |= low
        mask ^= low
        count -= 1
    return out
