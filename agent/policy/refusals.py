"""Refusal texts: what kubelet shows when nothing fits (capacity) or no place satisfies
the pod rules. Pure string building from the chooser's ranking and the ledger."""

from __future__ import annotations

from agent.policy.classes import word
from agent.policy.ledger import Ledger
from agent.policy.pools import Pool
from agent.policy.request import CpuKind, Need
from agent.policy.rulings import Required
from topology.render import format_bytes

MAX_FULL_LISTED = 8


def exhausted(
    ledger: Ledger, need: Need, free: tuple[int, int], rejected: list[tuple[Pool, str]]
) -> str:
    """RESOURCE_EXHAUSTED: what was asked and what there is (`free`: the ordinary
    and isolated CPUs an exclusive container could take)."""
    reasons = {pool.index: reason for pool, reason in rejected}
    root = reasons.get(0)
    # Memory is named with the request, in units a person reads, so the
    # reason after "machine:" is not mistaken for part of the CPU count.
    memory = f" with {format_bytes(need.memory_bytes)} of memory" if need.memory_bytes else ""
    if need.kind is CpuKind.EXCLUSIVE:
        ordinary, isolated = free
        mask = (ordinary | isolated) & ledger.classes.required(need.cpu_class)
        per_node = max((mask & m).bit_count() for _, m in ledger.node_masks)
        text = (
            f"requested {need.exclusive_cpus} exclusive{word(need.cpu_class)} CPUs{memory}, "
            f"at most {per_node} free in any NUMA node; {mask.bit_count()} free in total"
        )
    else:
        shared = ledger.shared_mask()
        best = max(state.free_milli(shared) for state in ledger.states)
        text = (
            f"requested {need.milli_cpu}m of shared{word(need.cpu_class)} CPU{memory}, "
            f"at most {max(best, 0)}m free in any pool"
        )
    if root is not None:
        text += f"; machine: {root}"
    return text


def unsatisfied(
    need: Need,
    ruled_out: list[tuple[Pool, list[Required]]],
    rejected: list[tuple[Pool, str]],
) -> str:
    """FAILED_PRECONDITION: which rules leave no place, and why."""
    # A rule some place satisfies is not why nothing fits, when another rule
    # fails everywhere: name the rules that fail in every place, if any do.
    everywhere = set.intersection(*({r.rule for r in failing} for _, failing in ruled_out))
    seen: dict[str, Required] = {}
    for _, failing in ruled_out:
        for rule in failing:
            if not everywhere or rule.rule in everywhere:
                seen.setdefault(rule.rule, rule)
    parts = [f"{rule.rule}: {rule.why()}" for rule in seen.values()]
    text = f"no place for {need.describe()} satisfies the pod rules: " + "; ".join(parts)
    if rejected:
        full = ", ".join(pool.name for pool, _ in rejected[:MAX_FULL_LISTED])
        more = (
            f" (+{len(rejected) - MAX_FULL_LISTED} more)" if len(rejected) > MAX_FULL_LISTED else ""
        )
        text += f"; without room: {full}{more}"
    return text
