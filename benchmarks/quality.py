"""Placement quality: every scenario of the suite run by the agent and the baselines,
scored with benchmarks.metrics, and compared with an exhaustive search.

The exhaustive search puts every container that has an affinity relation in every
pool of the policy's pool tree (scored with the policy's closeness table), with the
other containers held where the agent put them, under necessary capacity rules
(per pool: exclusive CPUs + shared milliCPU fit its usable CPUs, one CPU left when
shared work is there). Those rules are looser than the real ones, so its optimum is
an upper bound on what any placer can reach: attainment 1.0 is the best possible.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent.policy.closeness import closeness_table
from agent.policy.config import PolicyConfig
from agent.policy.pools import PoolTree, build_pools
from agent.policy.request import CpuKind, classify
from benchmarks.metrics import (
    Placed,
    affinity_objective,
    attainment,
    hard_faults,
    nodes_of,
    numa_aligned,
    set_closeness,
    whole_cores,
)
from benchmarks.placers import AgentPlacer, FirstFitPlacer, Placer, RandomPlacer
from benchmarks.scenarios import MACHINE_SPECS, Add, Scenario, suite
from devtools.fakesysfs import write_sysfs
from topology.sysfs import read_machine
from topology.tree import Machine

# Beyond this many containers with affinity relations, the search is skipped.
MAX_EXHAUSTIVE = 8

PlacerFactory = Callable[[Machine, PolicyConfig], Placer]
PLACERS: dict[str, PlacerFactory] = {
    "agent": AgentPlacer,
    # The same policy with symmetric_affinity on (placed containers' rules count too).
    "agent-symmetric": lambda m, c: AgentPlacer(m, replace(c, symmetric_affinity=True)),
    "first-fit": FirstFitPlacer,
    "random": lambda m, c: RandomPlacer(m, c, seed=7),
}


@dataclass(slots=True)
class Score:
    placed: int = 0
    refused: int = 0
    faults: list[str] = field(default_factory=list)
    numa_aligned: int = 0
    whole_cores: int = 0
    exclusive: int = 0
    even_exclusive: int = 0
    objective: float = 0.0
    attainment: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "placed": self.placed,
            "refused": self.refused,
            "hard_faults": len(self.faults),
            "fault_examples": self.faults[:3],
            "numa_aligned": self.numa_aligned,
            "whole_cores": self.whole_cores,
            "exclusive": self.exclusive,
            "even_exclusive": self.even_exclusive,
            "objective": round(self.objective, 4),
            "attainment": None if self.attainment is None else round(self.attainment, 4),
        }


def load_machine(label: str, cache: dict[str, Machine] | None = None) -> Machine:
    if cache is not None and label in cache:
        return cache[label]
    with tempfile.TemporaryDirectory(prefix="na-bench-") as tmp:
        write_sysfs(MACHINE_SPECS[label], Path(tmp))
        machine = read_machine(Path(tmp), cpu_info=False)
    if cache is not None:
        cache[label] = machine
    return machine


def run(scenario: Scenario, machine: Machine, placer: Placer) -> tuple[Score, list[Placed]]:
    """Drive the events through `placer`; faults are checked after every event, NUMA
    alignment and whole cores at each exclusive placement."""
    score = Score()
    reserved = scenario.config.reserved_cpus
    for event in scenario.events:
        if isinstance(event, Add):
            cpus = placer.place(event.request)
            if cpus is None:
                score.refused += 1
                continue
            score.placed += 1
            need = classify(event.request, scenario.config)
            if need.kind is CpuKind.EXCLUSIVE:
                score.exclusive += 1
                score.numa_aligned += numa_aligned(machine, reserved, cpus)
                if need.exclusive_cpus % 2 == 0:
                    score.even_exclusive += 1
                    score.whole_cores += whole_cores(machine, cpus)
        else:
            placer.release(event.key)
        snapshot = placer.snapshot()
        score.faults += hard_faults(machine, reserved, snapshot)
    final = placer.snapshot()
    where = {p.key: nodes_of(machine, p.cpus) for p in final}
    score.objective = affinity_objective(scenario.weights(), where, set_closeness(machine))
    return score, final


@dataclass(frozen=True, slots=True)
class Bounds:
    best: float
    worst: float
    related: int
    visited: int


def exhaustive(scenario: Scenario, machine: Machine, held: Sequence[Placed]) -> Bounds | None:
    """Best and worst affinity objective over every pool assignment of the containers
    with affinity relations (the others held where `held` has them); None if too many."""
    # Containers the agent refused are left out: the bound is for what it did place.
    present = {p.key for p in held}
    live = {k: r for k, r in scenario.live().items() if k in present}
    weights = {pair: w for pair, w in scenario.weights().items() if set(pair) <= present}
    related = [k for k in live if any(k in pair for pair in weights)]
    if len(related) > MAX_EXHAUSTIVE:
        return None
    tree = build_pools(machine)
    table = closeness_table(machine, tree)
    config = scenario.config
    unusable = config.reserved_cpus.mask | machine.isolated.mask
    usable = [(p.cpus.mask & ~unusable).bit_count() for p in tree.pools]
    lineage = [(p.index, *p.ancestors) for p in tree.pools]
    n = len(tree.pools)
    excl, milli, shared = [0] * n, [0] * n, [0] * n
    demand: dict[
        str, tuple[int, int]
    ] = {}  # key -> (exclusive CPUs, shared milli) ; -1 milli: reserved
    for key, request in live.items():
        need = classify(request, config)
        if need.kind is CpuKind.RESERVED:
            demand[key] = (0, -1)
        elif need.kind is CpuKind.EXCLUSIVE:
            demand[key] = (need.exclusive_cpus, 0)
        else:
            demand[key] = (0, need.milli_cpu)
    for p in held:
        if p.key in related or p.key not in demand or demand[p.key][1] < 0:
            continue
        home = tree.smallest_containing(p.cpus).index
        _load(demand[p.key], lineage[home], excl, milli, shared, +1)
    best = _search(related, weights, table, tree, usable, lineage, demand, excl, milli, shared, 1)
    worst = _search(related, weights, table, tree, usable, lineage, demand, excl, milli, shared, -1)
    return Bounds(best[0], -worst[0], len(related), best[1] + worst[1])


def _load(
    demand: tuple[int, int],
    line: tuple[int, ...],
    excl: list[int],
    milli: list[int],
    shared: list[int],
    sign: int,
) -> None:
    cpus, m = demand
    for a in line:
        excl[a] += sign * cpus
        if not cpus:
            milli[a] += sign * m
            shared[a] += sign
    return None


def _fits(
    line: tuple[int, ...], usable: list[int], excl: list[int], milli: list[int], shared: list[int]
) -> bool:
    for a in line:
        if excl[a] * 1000 + milli[a] > usable[a] * 1000:
            return False
        if shared[a] and excl[a] >= usable[a]:
            return False
    return True


def _search(
    keys: Sequence[str],
    weights: dict[tuple[str, str], int],
    table: tuple[tuple[float, ...], ...],
    tree: PoolTree,
    usable: list[int],
    lineage: list[tuple[int, ...]],
    demand: dict[str, tuple[int, int]],
    excl: list[int],
    milli: list[int],
    shared: list[int],
    sign: int,
) -> tuple[float, int]:
    """max of sign * objective by depth-first search with an optimistic bound."""
    count = len(keys)
    if count == 0:
        return 0.0, 0
    low = min(min(row) for row in table)
    # terms[i]: (j, w_ij, w_ji) for j < i, signed; bound[i]: best the terms of i.. can add.
    terms: list[list[tuple[int, float, float]]] = [[] for _ in keys]
    optimistic = [0.0] * (count + 1)
    for i in range(count):
        for j in range(i):
            wij = sign * weights.get((keys[i], keys[j]), 0)
            wji = sign * weights.get((keys[j], keys[i]), 0)
            if wij or wji:
                terms[i].append((j, wij, wji))
                optimistic[i] += sum(w if w > 0 else w * low for w in (wij, wji))
    for i in range(count - 1, -1, -1):
        optimistic[i] += optimistic[i + 1]
    order = sorted(range(len(tree.pools)), key=lambda p: -tree.pools[p].depth)
    where = [0] * count
    best = [float("-inf")]
    visited = [0]

    def dfs(i: int, value: float) -> None:
        visited[0] += 1
        if i == count:
            best[0] = max(best[0], value)
            return
        if value + optimistic[i] <= best[0] + 1e-12:
            return
        need = demand[keys[i]]
        for p in order:
            line = lineage[p]
            if need[0] > usable[p]:
                continue
            _load(need, line, excl, milli, shared, +1)
            if _fits(line, usable, excl, milli, shared):
                row = table[p]
                gain = sum(
                    wij * row[where[j]] + wji * table[where[j]][p] for j, wij, wji in terms[i]
                )
                where[i] = p
                dfs(i + 1, value + gain)
            _load(need, line, excl, milli, shared, -1)

    dfs(0, 0.0)
    return best[0], visited[0]


def evaluate(scenarios: Sequence[Scenario] | None = None) -> list[dict[str, object]]:
    """Every scenario scored for every placer; JSON-able rows."""
    machines: dict[str, Machine] = {}
    rows: list[dict[str, object]] = []
    for scenario in scenarios if scenarios is not None else suite():
        machine = load_machine(scenario.machine, machines)
        scores: dict[str, Score] = {}
        held: list[Placed] = []
        for name, factory in PLACERS.items():
            score, final = run(scenario, machine, factory(machine, scenario.config))
            scores[name] = score
            if name == "agent":
                held = final
        bounds = exhaustive(scenario, machine, held) if scenario.has_affinities else None
        if bounds is not None:
            for score in scores.values():
                score.attainment = attainment(score.objective, bounds.best, bounds.worst)
        rows.append(
            {
                "scenario": scenario.name,
                "family": scenario.family,
                "machine": scenario.machine,
                "containers": sum(isinstance(e, Add) for e in scenario.events),
                "affinities": scenario.has_affinities,
                "best": None if bounds is None else round(bounds.best, 4),
                "worst": None if bounds is None else round(bounds.worst, 4),
                "related": None if bounds is None else bounds.related,
                "scores": {name: s.as_dict() for name, s in scores.items()},
            }
        )
    return rows
