"""One term type, one evaluator: whatever wrote a term, placement reads it the same way
(agent/terms/term.py, agent/policy/evaluation.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.affinity import ANNOTATION_AFFINITY, ContainerSelector, Expression, crm_term
from agent.policy.errors import RuleUnsatisfied
from agent.policy.policy import Policy
from agent.policy.pools import Pool
from agent.rules import Level
from agent.terms.operator import Operator
from agent.terms.term import Term, TermKind
from agent.workload import QoSClass
from tests.policy.helpers import policy, request
from topology.tree import Machine

Machines = Callable[[str], Machine]
B = QoSClass.BURSTABLE
EVERY = Expression("", Operator.ALWAYS_TRUE)
SHAPES = ["xeon-2s-2numa", "epyc-2s-nps4", "server-4s"]


def numa_pools(pol: Policy) -> list[Pool]:
    """The pool of each NUMA node (a socket's, when it has one node)."""
    return [pol.tree.smallest_containing(n.cpus) for n in pol.machine.iter_numa_nodes()]


def placed_apart(pol: Policy) -> None:
    """Two containers of pod p, in the first and the last NUMA node."""
    numa = numa_pools(pol)
    pol.place_in(request("a", 500, qos=B, pod="p", name="a"), numa[0].name)
    pol.place_in(request("b", 500, qos=B, pod="p", name="b"), numa[-1].name)


@pytest.mark.parametrize("shape", SHAPES)
def test_colocate_pods_is_a_term_like_a_written_rule(machines: Machines, shape: str) -> None:
    """`colocate_pods` gives every container a term by closeness towards its pod's
    containers: the same place and score as that rule written in cri-resource-
    manager's annotation."""
    machine = machines(shape)
    by_option = policy(machine, colocate_pods=True, colocate_weight=7)
    placed_apart(by_option)
    option = by_option.place(request("c", 200, qos=B, pod="p", name="c"))
    by_rule = policy(machine)
    placed_apart(by_rule)
    rule = crm_term(ANNOTATION_AFFINITY, EVERY, None, 7)
    written = by_rule.place(request("c", 200, qos=B, pod="p", name="c", terms=[rule]))
    assert (option.pool, option.score) == (written.pool, written.score)
    assert option.score > 0
    assert "colocate_pods: 2 containers of its pod" in option.explanation
    assert "cri-resource-manager affinities toward 2 placed containers" in written.explanation


@pytest.mark.parametrize("shape", SHAPES)
def test_a_required_container_term_at_a_level_is_held_by_the_same_evaluator(
    machines: Machines, shape: str
) -> None:
    """A term neither annotation writes today (cri-resource-manager's selector,
    required, at a level): the evaluator keeps it as it keeps Kubernetes' terms."""
    pol = policy(machines(shape))
    numa = numa_pools(pol)
    db = pol.place_in(request("db", 1000, pod="db", name="db"), numa[0].name)
    away = Term(
        TermKind.ANTI_AFFINITY,
        True,
        0,
        ContainerSelector(Expression("name", Operator.EQUALS, ("db",)), EVERY),
        Level.NUMA,
        "test",
        "away from db",
    )
    web = pol.place(request("web", 2000, pod="web", name="web", terms=[away]))
    assert not web.cpus.mask & numa[0].cpus.mask
    assert db.cpus.mask & numa[0].cpus.mask
    # With db in every NUMA node, no place is left: refused, naming the term.
    for node in numa[1:]:
        pol.place_in(request(f"db-{node.name}", 1000, pod=f"db-{node.name}", name="db"), node.name)
    with pytest.raises(RuleUnsatisfied, match="test: away from db"):
        pol.place(request("web2", 2000, pod="web2", name="web", terms=[away]))
    pol.check_invariants()
