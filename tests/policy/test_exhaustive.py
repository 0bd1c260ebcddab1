"""Against an exhaustive search: at every step the policy reaches the best affinity score
that any pool with room would give, given what is already placed (the online order).

The search is independent of the policy's fast path: each pool is tried by forcing the
placement on a copy, and the score is recomputed naively, pair by pair, from node
closeness averaged over the node pairs of the two homes.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.affinity import ANNOTATION_AFFINITY, Expression, Operator, crm_term, effective_affinity
from agent.policy.closeness import node_closeness
from agent.policy.errors import ResourceExhausted
from agent.policy.policy import Policy
from agent.policy.request import ContainerRequest
from agent.workload import ContainerInfo, QoSClass
from tests.policy.helpers import policy, request
from topology.tree import Machine

Machines = Callable[[str], Machine]

_container = st.tuples(
    st.sampled_from(["exclusive", "shared"]),
    st.integers(1, 12),  # CPUs (exclusive) or tenths of a CPU (shared)
    st.lists(st.integers(-4, 4), min_size=6, max_size=6),  # weights to earlier ones
)
SCENARIOS = st.lists(_container, min_size=2, max_size=6)

EVERY = Expression("", Operator.ALWAYS_TRUE)


def naive_score(
    pol: Policy,
    machine: Machine,
    placed: dict[str, ContainerInfo],
    req: ContainerRequest,
    pool: str,
) -> float:
    if not req.terms:
        return 0.0
    mine = pol.tree.by_name(pool).numa_nodes
    total = 0.0
    for key, decision in pol.assignments().items():
        if key == req.key or decision.pool == "reserved":
            continue
        weight = effective_affinity(req.container, req.terms, placed[key])
        if not weight:
            continue
        theirs = pol.tree.by_name(decision.pool).numa_nodes
        pairs = [node_closeness(machine, a, b) for a, b in itertools.product(mine, theirs)]
        total += weight * sum(pairs) / len(pairs)
    return total


@pytest.mark.parametrize("shape", ["xeon-2s-2numa", "dies-2-per-socket", "isolated-offline"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scenario=SCENARIOS)
def test_greedy_choice_is_the_best_any_pool_allows(
    machines: Machines, shape: str, scenario: list[tuple[str, int, list[int]]]
) -> None:
    machine = machines(shape)
    pol = policy(machine)
    placed: dict[str, ContainerInfo] = {}
    for index, (kind, size, weights) in enumerate(scenario):
        terms = [
            crm_term(ANNOTATION_AFFINITY, Expression("name", Operator.EQUALS, (f"c{j}",)), EVERY, w)
            for j, w in enumerate(weights[:index])
            if w
        ]

        if kind == "exclusive":
            req = request(f"c{index}", size * 1000, terms=terms)
        else:
            req = request(f"c{index}", size * 100, qos=QoSClass.BURSTABLE, terms=terms)
        best: float | None = None
        for pool in pol.tree.pools:
            trial = copy.deepcopy(pol)
            try:
                decision = trial.place_in(req, pool.name)
            except ResourceExhausted:
                continue
            score = naive_score(trial, machine, placed, req, decision.pool)
            best = score if best is None else max(best, score)
        try:
            decision = pol.place(req)
        except ResourceExhausted:
            assert best is None, f"refused {req.key} although some pool had room"
            continue
        assert best is not None
        got = naive_score(pol, machine, placed, req, decision.pool)
        assert got == pytest.approx(decision.score, abs=1e-6)
        assert got == pytest.approx(best, abs=1e-6)
        placed[req.key] = req.container
        pol.check_invariants()
