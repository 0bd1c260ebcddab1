"""Topology spread constraints inside the machine (numa-agent.io/topology-spread-constraints):
the Even Pods Spreading design's own cases with NUMA nodes and sockets for zones, and
every rule of the count, the skew, the eligible domains and minDomains.

The 3-NUMA-node machine has 4 cores x 2 threads per node: NUMA node n is pool
`numa{n}`. Counts are set up by placing matching pods where the case says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agent.policy.errors import RuleUnsatisfied
from agent.policy.policy import Decision, Policy
from agent.rules import Level
from tests.policy.helpers import spec_machine
from tests.policy.test_pod_rules import B, G, policy, request, touched
from topology.shapes import MachineSpec
from topology.tree import Machine

THREE = MachineSpec(numa_per_die=3, cores_per_numa=4)
WEB = {"matchLabels": {"app": "web"}}


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Machine:
    return spec_machine(THREE, tmp_path_factory.mktemp("spread"), "three-numa")


def spread(
    max_skew: int = 1,
    level: Level = Level.NUMA,
    when: str = "DoNotSchedule",
    min_domains: int | None = None,
    selector: dict[str, Any] = WEB,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": str(level),
        "whenUnsatisfiable": when,
        "labelSelector": selector,
    }
    if min_domains is not None:
        out["minDomains"] = min_domains
    return out


def web(
    name: str, *constraints: dict[str, Any], milli: int = 1000, rules: str | None = None
) -> Any:
    return request(
        name, milli, labels={"app": "web"}, spread=json.dumps(list(constraints)), rules=rules
    )


def counts(pol: Policy, *per_node: int) -> None:
    """Matching pods already running: `per_node[n]` of them in NUMA node n."""
    for node, n in enumerate(per_node):
        for i in range(n):
            pol.place_in(request(f"old-{node}-{i}", 1000, labels={"app": "web"}), f"numa{node}")


def node_of(machine: Machine, decision: Decision) -> int:
    (node,) = touched(machine, Level.NUMA, decision.cpus)
    return node


@pytest.mark.parametrize(
    ("existing", "max_skew", "allowed"),
    [
        ((1, 1, 0), 1, {2}),
        ((3, 2, 1), 1, {2}),
        ((3, 2, 1), 2, {1, 2}),
        ((0, 0, 0), 1, {0, 1, 2}),
        ((2, 2, 2), 1, {0, 1, 2}),
    ],
)
def test_the_design_cases(
    three: Machine, existing: tuple[int, ...], max_skew: int, allowed: set[int]
) -> None:
    pol = policy(three)
    counts(pol, *existing)
    got = node_of(three, pol.place(web("new", spread(max_skew))))
    assert got in allowed
    # And every node outside `allowed` is refused when forced there.
    for node in set(range(3)) - allowed:
        again = policy(three)
        counts(again, *existing)
        with pytest.raises(RuleUnsatisfied):
            again.place_in(web("new", spread(max_skew)), f"numa{node}")


def test_a_full_domain_refuses_under_do_not_schedule_and_not_under_schedule_anyway(
    three: Machine,
) -> None:
    """3/3/0 with node 2 full (of other pods): the minimum is still 0, so nodes 0 and 1
    would make the skew 4; DoNotSchedule refuses, naming the constraint and counts;
    ScheduleAnyway places on node 0 or 1."""
    for when in ("DoNotSchedule", "ScheduleAnyway"):
        pol = policy(three)
        counts(pol, 3, 3, 0)
        pol.place_in(request("filler", 8000, labels={"app": "other"}), "numa2")
        req = web("new", spread(1, when=when))
        if when == "DoNotSchedule":
            with pytest.raises(RuleUnsatisfied) as refused:
                pol.place(req)
            text = str(refused.value)
            assert "numa-agent.io/topology-spread-constraints: [0]: maxSkew 1" in text
            assert "numa0 3, numa1 3, numa2 0" in text
            assert "the skew more than 1" in text
        else:
            assert node_of(three, pol.place(req)) in (0, 1)


def test_node_affinity_narrows_the_domains_spread_over(three: Machine) -> None:
    """With NUMA node 2 excluded by required node affinity, replicas spread evenly
    over nodes 0 and 1: node 2's count (0) is not the minimum."""
    rules = json.dumps(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "numa-agent.io/numa", "operator": "NotIn", "values": ["2"]}
                            ]
                        }
                    ]
                }
            }
        }
    )
    pol = policy(three)
    got = [node_of(three, pol.place(web(f"web-{n}", spread(1), rules=rules))) for n in range(6)]
    assert sorted(got) == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("qos", [G, B])
def test_a_burst_of_twelve_replicas_ends_four_four_four(three: Machine, qos: Any) -> None:
    pol = policy(three)
    got = []
    for n in range(12):
        milli = 1000 if qos is G else 200
        req = request(
            f"web-{n}", milli, qos=qos, labels={"app": "web"}, spread=json.dumps([spread(1)])
        )
        decision = pol.place(req)
        got.append(node_of(three, decision))
        per = [got.count(i) for i in range(3)]
        assert max(per) - min(per) <= 1, per  # never more than maxSkew apart on the way
    assert [got.count(i) for i in range(3)] == [4, 4, 4]


@pytest.mark.parametrize("shape", ["xeon-2s-2numa", "dies-2-per-socket", "server-4s"])
def test_sockets_as_the_level(machines: Callable[[str], Machine], shape: str) -> None:
    m = machines(shape)
    pol = policy(m)
    sockets = len(m.sockets)
    got: list[int] = []
    for n in range(2 * sockets):
        d = pol.place(web(f"web-{n}", spread(1, level=Level.SOCKET)))
        got.extend(touched(m, Level.SOCKET, d.cpus))
    assert [got.count(s) for s in range(sockets)] == [2] * sockets


def test_min_domains_counts_missing_domains_as_zero(three: Machine) -> None:
    """minDomains 5 with 3 eligible NUMA nodes: the global minimum is taken as 0, so
    with maxSkew 1 each node takes one replica and the fourth is refused."""
    pol = policy(three)
    for n in range(3):
        pol.place(web(f"web-{n}", spread(1, min_domains=5)))
    with pytest.raises(RuleUnsatisfied):
        pol.place(web("web-3", spread(1, min_domains=5)))
    # Without minDomains the fourth goes.
    assert pol.place(web("web-3", spread(1))).exclusive


def test_only_the_pods_own_namespace_counts(three: Machine) -> None:
    pol = policy(three)
    for node in range(2):
        pol.place_in(
            request(f"other-{node}", 1000, labels={"app": "web"}, namespace="x"), f"numa{node}"
        )
    pol.place_in(request("mine", 1000, labels={"app": "web"}), "numa2")
    # Counted: only "mine" (numa2): 0/0/1, so nodes 0 and 1 are allowed, 2 is not.
    assert node_of(three, pol.place(web("new", spread(1)))) in (0, 1)


def test_a_shared_container_in_a_large_pool_counts_in_every_domain(three: Machine) -> None:
    pol = policy(three)
    pol.place_in(request("wide", 500, qos=B, labels={"app": "web"}), "machine")
    # 1/1/1: every node is allowed.
    assert pol.place(web("new", spread(1))).exclusive
    # A new shared replica in the machine pool would be counted in all three nodes.
    narrow = pol.place(
        request("w2", 200, qos=B, labels={"app": "web"}, spread=json.dumps([spread(1)]))
    )
    assert narrow.pool.startswith("numa")


def test_the_pods_own_containers_count_once(three: Machine) -> None:
    """A pod's second container where its first is does not raise that domain's count."""
    pol = policy(three)
    counts(pol, 1, 1, 0)
    first = pol.place(
        request("p", 1000, labels={"app": "web"}, spread=json.dumps([spread(1)]), container="a")
    )
    assert node_of(three, first) == 2
    second = pol.place_in(
        request("p", 1000, labels={"app": "web"}, spread=json.dumps([spread(1)]), container="b"),
        "numa2",
    )
    assert second.exclusive


def test_schedule_anyway_constraints_rank_by_skew_and_add_up(three: Machine) -> None:
    pol = policy(three)
    counts(pol, 2, 1, 1)
    soft = spread(1, when="ScheduleAnyway")
    other = spread(
        1, when="ScheduleAnyway", level=Level.HOST, selector={"matchLabels": {"app": "x"}}
    )
    d = pol.place(web("new", soft, other))
    assert node_of(three, d) in (1, 2)
    # The pod does not match app=x: the KEP's selfMatch does not count it there.
    assert "skew 1 for [0]" in d.explanation and "skew 0 for [1]" in d.explanation


def test_nothing_moves_when_counts_drift(three: Machine) -> None:
    pol = policy(three)
    placed = [pol.place(web(f"web-{n}", spread(1))) for n in range(3)]
    before = {d.key: d.cpus for d in placed}
    pol.release(placed[0].key)  # now 0/1/1: no one is moved to even it out
    assert {k: r.cpus for k, r in pol.records().items()} == {
        k: v for k, v in before.items() if k != placed[0].key
    }


def test_spread_over_several_shapes_never_exceeds_max_skew(
    machines: Callable[[str], Machine],
) -> None:
    for shape in ("epyc-2s-nps4", "server-4s", "dies-2-per-socket"):
        m = machines(shape)
        pol = policy(m)
        nodes = len(list(m.iter_numa_nodes()))
        got: list[int] = []
        for n in range(3 * nodes):
            d = pol.place(web(f"web-{n}", spread(1)))
            got.extend(touched(m, Level.NUMA, d.cpus))
            per = [got.count(i) for i in range(nodes)]
            assert max(per) - min(per) <= 1, (shape, per)
