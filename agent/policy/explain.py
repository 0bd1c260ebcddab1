"""Human-readable explanations of placement decisions: candidates, scores, the deciding rule.

Pure string building from the ranking `policy.py` computed; used by the debug
log, `simulate --explain` and ResourceExhausted messages. Bounded whatever the
number of pods: at most MAX_LISTED candidates, pools without room and pools the
required rules exclude, and MAX_NOTES rule notes for each of the winner and the
runner-up, each list saying how many it leaves out. Rule notes are made text only
here, for what is shown; the state file keeps only the summary lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.policy.pools import Pool
from agent.policy.request import CpuKind, Need

# The comparator's rules in order, one per element of a candidate's rank tuple.
RULES_SHARED = (
    "higher affinity score",
    "lower spread skew",
    "deeper pool",
    "less loaded pool",
    "lower pool id",
)
RULES_EXCLUSIVE = (
    "higher affinity score",
    "lower spread skew",
    "deeper pool",
    "less fragmentation",
    "lower pool id",
)
# The parts of rule 3 for exclusive containers, in order.
FRAGMENTATION = (
    "its preferred kind of core",
    "isolated CPUs as preferred",
    "fewer newly split cores",
    "best fit",
)
MAX_LISTED = 12
MAX_NOTES = 6
# Candidates whose rule notes are shown: the winner and the runner-up it beat.
MAX_NOTED = 2
# The lines of an explanation a state file keeps (what was needed, where and why).
SUMMARY_LINES = 2


class HasRule(Protocol):
    """What the explanation reads of a required rule: its name (see rulings.Required)."""

    @property
    def rule(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    pool: Pool
    score: float
    rank: tuple[float, int, int, tuple[float, ...], int]
    detail: str  # "load 35%" / "splits 0 cores, leaves 12 free"
    pick: int = 0  # exclusive CPUs chosen in this pool (mask)
    home: int = 0  # the pool the container ends up in (exclusive: the deepest holding `pick`)
    # What the pod rules gave this place ("+50 <rule>", "skew 1 ..."), each made text
    # only when an explanation shows it.
    notes: tuple[object, ...] = ()
    occupied: int = 0  # the CPUs the container would occupy here (its pool, or its pick)


def deciding_rule(need: Need, winner: Candidate, runner_up: Candidate) -> str:
    rules = RULES_EXCLUSIVE if need.kind is CpuKind.EXCLUSIVE else RULES_SHARED
    for rule, a, b in zip(rules, winner.rank, runner_up.rank, strict=True):
        if a == b:
            continue
        if isinstance(a, tuple) and isinstance(b, tuple) and need.kind is CpuKind.EXCLUSIVE:
            part = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
            rule = f"{rule} ({FRAGMENTATION[part]})"
        return f"{rule} than {runner_up.pool.name}"
    return "identical rank (should not happen: pool ids differ)"


def summary(explanation: str) -> str:
    """The part of an explanation a restart needs to show again: its first lines."""
    return "\n".join(explanation.splitlines()[:SUMMARY_LINES])


def _more(count: int, shown: int) -> str:
    return f" (+{count - shown} more)" if count > shown else ""


def explain(
    key: str,
    need: Need,
    ranked: Sequence[Candidate],
    rejected: Sequence[tuple[Pool, str]],
    excluded: Sequence[tuple[Pool, Sequence[HasRule]]] = (),
) -> str:
    winner = ranked[0]
    if len(ranked) == 1:
        why = "the only pool with capacity"
    else:
        why = deciding_rule(need, winner, ranked[1])
    lines = [
        f"{key}: {need.why}, needs {need.describe()}",
        f"  -> {winner.pool.name} (score {winner.score:.3f}): {why}",
    ]
    for candidate in ranked[:MAX_NOTED]:
        if candidate.notes:
            notes = "; ".join(str(note) for note in candidate.notes[:MAX_NOTES])
            more = _more(len(candidate.notes), MAX_NOTES)
            lines.append(f"  rules for {candidate.pool.name}: {notes}{more}")
    listed = ", ".join(f"{c.pool.name} {c.score:.3f} [{c.detail}]" for c in ranked[:MAX_LISTED])
    more = f" (+{len(ranked) - MAX_LISTED} more)" if len(ranked) > MAX_LISTED else ""
    lines.append(f"  candidates: {listed}{more}")
    if rejected:
        out = "; ".join(f"{pool.name}: {reason}" for pool, reason in rejected[:MAX_LISTED])
        more = f" (+{len(rejected) - MAX_LISTED} more)" if len(rejected) > MAX_LISTED else ""
        lines.append(f"  rejected: {out}{more}")
    if excluded:
        out = "; ".join(
            f"{pool.name}: fails {', '.join(r.rule for r in failing[:2])}" + _more(len(failing), 2)
            for pool, failing in excluded[:MAX_LISTED]
        )
        lines.append(f"  excluded by required rules: {out}{_more(len(excluded), MAX_LISTED)}")
    return "\n".join(lines)
