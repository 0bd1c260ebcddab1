"""What the rules say of candidate places, as values the chooser ranks with.

The evaluator (evaluation.py) turns terms, node affinity and spread constraints
into these once per decision: masks of CPUs (a domain is in or out as a whole),
weights, per-domain counts, and per-pool pulls by closeness. A place is the CPUs
a container would occupy: a shared container its whole pool, an exclusive one
the CPUs picked for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from agent.policy.domains import Topology
from agent.rules import Level, SpreadConstraint
from agent.terms.term import Term

# Scores are sums of products of floats; rounding keeps symmetric pools tied.
SCORE_DIGITS = 9


@dataclass(frozen=True, slots=True)
class Required:
    """A rule a place must satisfy: lie inside `allowed` (and within one domain of
    `single`, when set). `why` says, for a refusal, why places fail it."""

    rule: str  # "numa-agent.io/affinity: podAntiAffinity....[0] (required anti-affinity at ...)"
    allowed: int
    single: Level | None
    why: Callable[[], str]

    def fails(self, cpus: int, topology: Topology) -> bool:
        if cpus & ~self.allowed:
            return True
        return self.single is not None and topology[self.single].single(cpus) is None


@dataclass(frozen=True, slots=True)
class Preferred:
    """A preference at a level: an affinity earns a place `weight` when the place lies
    inside `mask` and within one domain of `single`; an anti-affinity costs it
    `weight` when the place touches `mask` (the same ranking as earning the weight
    where it holds, but an empty machine scores 0, and only places it concerns are
    noted)."""

    rule: str
    weight: int
    mask: int
    single: Level | None
    anti: bool = False
    owner: str = ""  # a placed pod's key when it is that pod's term (symmetry)
    term: Term | None = None  # ... and the term, for `rule` built only when shown
    others: int = 0  # placed pods besides `owner` whose like terms are summed in here

    @property
    def text(self) -> str:
        if self.term is None:
            return self.rule
        term = self.term
        owner = (
            f"pod {self.owner}'s"
            if not self.others
            else (f"pods {self.owner} and {self.others} more with like terms:")
        )
        return f"{owner} {term.source}: {term.path} ({term.strength()} at {term.where})"

    def score(self, cpus: int, topology: Topology) -> int:
        if self.anti:
            return -self.weight if cpus & self.mask else 0
        if cpus & ~self.mask:
            return 0
        if self.single is not None and topology[self.single].single(cpus) is None:
            return 0
        return self.weight


class Note(NamedTuple):
    """What a preference gave a place; its text is built only if an explanation shows it.
    (A tuple: one is made per preference and candidate, so it must be cheap.)"""

    got: int
    pref: Preferred

    def __str__(self) -> str:
        return f"{self.got:+d} {self.pref.text}"


@dataclass(frozen=True, slots=True)
class Spread:
    """A ScheduleAnyway constraint: its counts per domain, ready for a skew."""

    constraint: SpreadConstraint
    counts: tuple[int, ...]  # matching pods per domain of the level
    mine: int  # CPUs of the domains where the pod itself is counted already
    counts_self: bool  # the pod matches its own selector (the KEP's selfMatch)

    def added(self, mask: int) -> int:
        """What placing the pod in the domain `mask` adds to that domain's count."""
        return 1 if self.counts_self and not mask & self.mine else 0


class Source(StrEnum):
    """The terms by closeness, each shown as its own part of a score."""

    AFFINITY = "cri-resource-manager affinities toward {n} placed container{s}"
    SYMMETRIC = "cri-resource-manager affinities of {n} placed container{s} toward it"
    COLOCATE_PODS = "colocate_pods: {n} container{s} of its pod"
    COLOCATE_NAMESPACES = "colocate_namespaces: {n} container{s} of its namespace"


class Pull(NamedTuple):
    """What one source of terms by closeness gave a place, in weight points (the
    units of the level terms' notes); text only when an explanation shows it."""

    got: float
    source: Source
    partners: int

    def __str__(self) -> str:
        plural = "" if self.partners == 1 else "s"
        return f"{self.got:+.3f} {self.source.format(n=self.partners, s=plural)}, by closeness"


@dataclass(frozen=True, slots=True)
class Pulls:
    """The score by closeness of every pool, and each source's part of it."""

    total: list[float]
    parts: tuple[tuple[Source, int, list[float]], ...]

    def notes(self, index: int) -> tuple[Pull, ...]:
        return tuple(
            Pull(scores[index], source, partners)
            for source, partners, scores in self.parts
            if scores[index]
        )
