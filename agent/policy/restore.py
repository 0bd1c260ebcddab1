"""Taking running containers back: a saved place (restart) or cpusets the runtime
reports (adoption), checked against the ledger. Reads only; the policy installs."""

from __future__ import annotations

from dataclasses import replace

from agent.policy.ledger import Ledger, new_record
from agent.policy.pools import Pool
from agent.policy.record import RESERVED_POOL_NAME, PlacementRecord, SavedPlacement
from agent.policy.request import ContainerRequest, CpuKind, Need
from topology.cpuset import CPUSet


def can_hold_exclusive(ledger: Ledger, need: Need, mask: int) -> bool:
    """Whether a running container may keep exactly the CPUs `mask` to itself: as
    many as it asks, online, nobody else's, not reserved, and one CPU stays shared."""
    if mask.bit_count() != need.exclusive_cpus or mask & ~ledger.online:
        return False
    if mask & (ledger.taken | ledger.reserved):
        return False
    return ledger.online & ~(ledger.taken | mask | ledger.reserved | ledger.isolated) != 0


def restorable(
    ledger: Ledger, request: ContainerRequest, need: Need, saved: SavedPlacement
) -> PlacementRecord | None:
    """The saved place as a record, when it is still valid here; else None."""
    if need.kind is CpuKind.RESERVED:
        if saved.pool != RESERVED_POOL_NAME:
            return None
        return new_record(request, need, None, 0, saved.score, saved.explanation)
    if saved.pool == RESERVED_POOL_NAME:
        return None
    try:
        pool = ledger.tree.by_name(saved.pool)
    except KeyError:
        return None
    mask = saved.exclusive.mask
    if need.kind is CpuKind.EXCLUSIVE:
        if not can_hold_exclusive(ledger, need, mask) or mask & ~pool.cpus.mask:
            return None
    elif mask or ledger.states[pool.index].usable(ledger.shared_mask()) == 0:
        return None
    return new_record(request, need, pool, mask, saved.score, saved.explanation)


def adopt_shared_pool(ledger: Ledger, cpus: CPUSet) -> Pool:
    """The smallest pool holding `cpus` that has shared CPUs (the machine at worst)."""
    tree = ledger.tree
    pool: Pool | None = tree.smallest_containing(cpus) if cpus else tree.root
    shared = ledger.shared_mask()
    while pool is not None and ledger.states[pool.index].usable(shared) == 0:
        pool = None if pool.parent is None else ledger.pools[pool.parent]
    return tree.root if pool is None else pool


def adopted(
    ledger: Ledger, request: ContainerRequest, need: Need, cpus: CPUSet, mems: CPUSet
) -> PlacementRecord:
    """A running container no record names, its place inferred from its cpusets:
    exclusive CPUs kept when it may hold them (in the deepest pool holding them),
    else a shared place in the smallest pool with shared CPUs that holds `cpus`."""
    note = f"{request.key}: {need.why}, adopted running on cpus {cpus or '-'} mems {mems or '-'}"
    if need.kind is CpuKind.RESERVED:
        return new_record(request, need, None, 0, 0.0, note)
    if need.kind is CpuKind.EXCLUSIVE and can_hold_exclusive(ledger, need, cpus.mask):
        home = ledger.tree.smallest_containing(cpus)
        return new_record(request, need, home, cpus.mask, 0.0, note)
    milli = need.milli_cpu or (need.exclusive_cpus * 1000)
    shared = replace(need, kind=CpuKind.SHARED, milli_cpu=milli)
    return new_record(request, shared, adopt_shared_pool(ledger, cpus), 0, 0.0, note)
