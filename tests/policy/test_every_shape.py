"""The core behaviours as tables over every named machine shape, in the manner of
kubelet's policy_test.go: each case is "this machine, these containers placed,
ask for this, expect exactly that", and every case runs on every shape.

Expected sets are worked out from the Machine (its NUMA nodes, cores, isolated
and reserved CPUs), never copied from the policy's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from agent.policy.policy import Decision, Policy
from agent.policy.request import ContainerRequest
from agent.workload import QoSClass
from tests.policy.helpers import policy, request
from topology.cpuset import CPUSet
from topology.shapes import SHAPES
from topology.tree import Machine, NumaNode

Machines = Callable[[str], Machine]
B, BE = QoSClass.BURSTABLE, QoSClass.BESTEFFORT


def shared_cpus(machine: Machine) -> CPUSet:
    """Where shared containers may run on an empty machine."""
    return machine.cpus - machine.isolated


def first_node(machine: Machine) -> NumaNode:
    return next(machine.iter_numa_nodes())


def ordinary(node: NumaNode, machine: Machine) -> CPUSet:
    return node.cpus - machine.isolated


@dataclass(frozen=True)
class Case:
    name: str
    config: dict[str, object]
    placed: Callable[[Machine], list[ContainerRequest]]  # placed first, in order
    ask: Callable[[Machine], ContainerRequest]
    expect: Callable[[Machine, Decision, Policy], None]


def whole_cores_of_one_node(m: Machine, d: Decision, _: Policy) -> None:
    """One core's worth of CPUs on an empty machine: exactly one whole core."""
    cores = [c.cpus for c in m.iter_cores() if c.cpus & d.cpus]
    assert len(cores) == 1 and cores[0] == d.cpus and d.exclusive


def one_core(m: Machine) -> ContainerRequest:
    size = max(len(c.cpus) for c in m.iter_cores() if not c.cpus & m.isolated)
    return request("db", size * 1000)


def fills_the_node(m: Machine, d: Decision, p: Policy) -> None:
    """The whole (non-isolated) first NUMA node, when one CPU stays shared elsewhere."""
    node = first_node(m)
    assert d.exclusive and d.cpus == ordinary(node, m)
    assert d.mems == CPUSet.of(m.memory_nodes_for(node.id))


def fill_node(m: Machine) -> ContainerRequest:
    node = first_node(m)
    size = len(ordinary(node, m)) - (1 if len(shared_cpus(m)) == len(ordinary(node, m)) else 0)
    return request("db", size * 1000)


def fills_all_but_one(m: Machine, d: Decision, p: Policy) -> None:
    node = first_node(m)
    if len(shared_cpus(m)) == len(ordinary(node, m)):  # one node: one CPU stays shared
        assert len(d.cpus) == len(ordinary(node, m)) - 1
        assert d.cpus < ordinary(node, m)
    else:
        fills_the_node(m, d, p)


def shared_on_everything_left(m: Machine, d: Decision, p: Policy) -> None:
    """A Burstable container next to an exclusive one: its cpuset is its pool's shared
    CPUs, and never an exclusive, isolated or reserved CPU."""
    held = CPUSet().union(*(r.exclusive for r in p.records().values()))
    pool = p.tree.by_name(d.pool)
    assert not d.exclusive
    assert d.cpus == pool.cpus - held - m.isolated - p.config.reserved_cpus
    assert d.cpus and d.cpus.isdisjoint(held)


def updates_narrow_the_others(m: Machine, d: Decision, p: Policy) -> None:
    """Taking exclusive CPUs updates exactly the shared containers whose cpuset held
    them, each to its old cpuset (its pool's shared CPUs) minus the new exclusive CPUs."""
    web = p.records()["web"]
    before = p.tree.by_name(web.pool_name).cpus - m.isolated
    assert d.exclusive
    assert web.cpus == before - d.cpus
    expected = [("web", web.cpus)] if before & d.cpus else []
    assert [(u.key, u.cpus) for u in d.updates] == expected


def reserved_namespace(m: Machine, d: Decision, p: Policy) -> None:
    reserved = p.config.reserved_cpus
    assert d.pool == "reserved" and d.cpus == reserved and not d.exclusive


def reserve_first(m: Machine) -> dict[str, object]:
    return {"reserved_cpus": str(ordinary(first_node(m), m).first())}


CASES = [
    Case("exclusive: one whole core", {}, lambda m: [], one_core, whole_cores_of_one_node),
    Case("exclusive: a whole NUMA node", {}, lambda m: [], fill_node, fills_all_but_one),
    Case(
        "shared beside exclusive",
        {},
        lambda m: [fill_node(m)],
        lambda m: request("web", 500, qos=B),
        shared_on_everything_left,
    ),
    Case(
        "exclusive narrows shared",
        {},
        lambda m: [request("web", 500, qos=BE)],
        one_core,
        updates_narrow_the_others,
    ),
    Case(
        "reserved namespace",
        {"reserved_cpus": "0"},
        lambda m: [],
        lambda m: request("proxy", 100, qos=B, namespace="kube-system"),
        reserved_namespace,
    ),
]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_placement(machines: Machines, shape: str, case: Case) -> None:
    m = machines(shape)
    config = dict(case.config)
    if config.get("reserved_cpus") == "0":
        config.update(reserve_first(m))
    pol = policy(m, **config)
    for req in case.placed(m):
        pol.place(req)
    decision = pol.place(case.ask(m))
    case.expect(m, decision, pol)
    pol.check_invariants()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_release_gives_everything_back(machines: Machines, shape: str) -> None:
    """Place a mix, release it in another order: shared cpusets widen back to what they
    were and the next container gets what the first one got on the empty machine."""
    m = machines(shape)
    pol = policy(m)
    web = pol.place(request("web", 500, qos=B))
    first = pol.place(one_core(m))
    pol.release("db")
    for req in (fill_node(m), request("batch", 0, qos=BE), request("api", 300, qos=B)):
        pol.place(req)
    for key in ("api", "db", "batch"):
        ups = pol.release(key)
        pol.check_invariants()
        assert {u.key for u in ups} <= {"web", "batch", "api"}
    assert pol.records()["web"].cpus == web.cpus
    assert pol.place(one_core(m)).cpus == first.cpus


@pytest.mark.parametrize("shape", list(SHAPES))
def test_restore_round_trip(machines: Machines, shape: str) -> None:
    """The records of a busy machine, restored into a fresh policy, are the same
    records, and the two go on to make the same next decision."""
    m = machines(shape)
    reqs = [
        fill_node(m),
        request("web", 500, qos=B),
        request("batch", 0, qos=BE),
        request("proxy", 100, qos=B, namespace="kube-system"),
    ]
    pol = policy(m)
    for req in reqs:
        pol.place(req)
    saved = {key: record.saved() for key, record in pol.records().items()}
    again = policy(m)
    for req in reqs:
        assert again.restore(req, saved[req.key]) is not None, req.key
    assert again.records() == pol.records()
    assert again.place(one_core(m)) == pol.place(one_core(m))
